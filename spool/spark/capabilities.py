"""What the broker can do, asked with one ApiVersions request (v0, on our own codec).

``supports_transactions(bootstrap)`` is true when the broker advertises every
API a transactional producer needs: InitProducerId (22), AddPartitionsToTxn
(24) and EndTxn (26) (the sink commits no consumer offsets, so it needs
neither AddOffsetsToTxn nor TxnOffsetCommit). The
exactly-once sink refuses to start without them, naming the option that
selects the at-least-once sink instead.
"""

from __future__ import annotations

from spool.protocol._generated import ApiVersionsRequest
from spool.security.client_config import ClientSecurity
from spool.spark.connection import Connection

TRANSACTION_APIS = {22: "InitProducerId", 24: "AddPartitionsToTxn", 26: "EndTxn"}


def api_keys(bootstrap: str, timeout: float = 10.0,
             security: ClientSecurity | None = None) -> set[int]:
    """The API keys the first reachable bootstrap broker advertises (over TLS/SASL when
    ``security`` says so: the connection the executors' reads use)."""
    last: Exception | None = None
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        conn = Connection(host.strip("[]"), int(port), security, timeout=timeout,
                          connect_timeout=timeout)
        try:
            return {k.api_key for k in conn.request(ApiVersionsRequest(), 0).api_keys}
        except (OSError, ValueError) as exc:
            last = exc
        finally:
            conn.close()
    raise ConnectionError(f"no broker reachable at {bootstrap}: {last}")


def missing_transaction_apis(bootstrap: str,
                             security: ClientSecurity | None = None) -> list[str]:
    have = api_keys(bootstrap, security=security)
    return [name for key, name in TRANSACTION_APIS.items() if key not in have]


def supports_transactions(bootstrap: str, security: ClientSecurity | None = None) -> bool:
    return not missing_transaction_apis(bootstrap, security)
