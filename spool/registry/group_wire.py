"""Which member of the registry's group holds a partition, asked over Spool's own client.

librdkafka's group admin calls can abort the process when the coordinator moves during
one (librdkafka #4605: ``rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt >
0'``, seen here with a broker of three killed), so the registry asks the group
coordinator itself, through ``spool.net.client.NodeClient``:

- ``wire_security(config)``: the registry's confluent-kafka (librdkafka) configuration's
  security settings as a ``ClientSecurity``: ``security.protocol``, ``sasl.mechanism(s)``
  with ``sasl.username``/``sasl.password`` (PLAIN, SCRAM-SHA-256/512) or OAUTHBEARER's
  unsecured tokens (``enable.sasl.oauthbearer.unsecure.jwt`` and
  ``sasl.oauthbearer.config``), ``ssl.ca.location`` (a PEM file) or ``ssl.ca.pem``,
  ``ssl.certificate.location``/``ssl.key.location`` or ``ssl.certificate.pem``/
  ``ssl.key.pem`` (PEM; read here when they are two files), or a PKCS12
  ``ssl.keystore.location``/``ssl.keystore.password``, ``ssl.key.password``,
  ``ssl.endpoint.identification.algorithm`` (https, none), ``ssl.cipher.suites``.
  Anything else that decides how a connection is secured (GSSAPI, OIDC tokens,
  ``enable.ssl.certificate.verification=false``, a CA directory, CRLs, engines...) is
  ``ClientConfigError`` naming it: the caller then keeps librdkafka's way.
- ``bootstrap_addresses(config)``: ``bootstrap.servers`` as ``[(host, port)]``
  (``ClientConfigError`` when there is none or one is not host:port).
- ``await partition_holder(addresses, security, group_id, topic, partition, timeout)``:
  FindCoordinator v3 (key type GROUP) through each bootstrap address in turn until one
  answers, then DescribeGroups v5 to the coordinator; the ``client_id`` of the member
  whose assignment (the ``consumer`` protocol's ``ConsumerProtocolAssignment``, its
  leading int16 version read as Kafka's ConsumerProtocol does: a newer one as the newest
  known) has (topic, partition). None when no member has it (a rebalance: the
  coordinator shows assignments of a Stable group only) or the answer is retriable
  (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, no address
  answering, a timeout); ``GroupWireError`` for another refusal (an ACL...). The caller
  retries. Each call opens its connections and closes them before returning.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from typing import Any

from spool.net.client import ClientError, NodeClient
from spool.protocol._generated.consumer_protocol_assignment import ConsumerProtocolAssignment
from spool.protocol._generated.describe_groups_request import DescribeGroupsRequest
from spool.protocol._generated.find_coordinator_request import FindCoordinatorRequest
from spool.protocol.errors import Errors, error_name
from spool.security.client_config import PROTOCOLS, ClientConfigError, ClientSecurity

RETRIABLE = {Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS,
             Errors.NOT_COORDINATOR}
CLIENT_ID = "spool-registry"

# keys that do not change how a connection is secured (or that wire_security reads)
_READ = frozenset("""
security.protocol sasl.mechanism sasl.mechanisms sasl.username sasl.password
enable.sasl.oauthbearer.unsecure.jwt sasl.oauthbearer.config sasl.oauthbearer.method
ssl.ca.location ssl.ca.pem ssl.certificate.location ssl.key.location ssl.certificate.pem
ssl.key.pem ssl.key.password ssl.keystore.location ssl.keystore.password
ssl.endpoint.identification.algorithm ssl.cipher.suites
""".split())
# librdkafka's values that mean its default here
_HARMLESS = {"enable.ssl.certificate.verification": ("true", "1"),
             "sasl.kerberos.service.name": None, "sasl.kerberos.principal": None,
             "sasl.kerberos.kinit.cmd": None, "sasl.kerberos.keytab": None,
             "sasl.kerberos.min.time.before.relogin": None,
             "ssl.ca.certificate.stores": None}


class GroupWireError(Exception):
    """The coordinator refused DescribeGroups with a non-retriable error."""


def bootstrap_addresses(config: Mapping[str, Any]) -> list[tuple[str, int]]:
    out = []
    for address in str(config.get("bootstrap.servers") or "").split(","):
        address = address.strip()
        if not address:
            continue
        for scheme in ("PLAINTEXT://", "SSL://", "SASL_PLAINTEXT://", "SASL_SSL://"):
            if address.upper().startswith(scheme):
                address = address[len(scheme):]
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ClientConfigError(f"bootstrap.servers: {address!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ClientConfigError("bootstrap.servers: no address")
    return out


def wire_security(config: Mapping[str, Any]) -> ClientSecurity:
    """The librdkafka configuration's security settings (module doc); ClientConfigError
    naming what cannot be mapped."""
    def get(key: str) -> str | None:
        v = config.get(key)
        return None if v is None else str(v).strip()

    protocol = (get("security.protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(f"security.protocol={protocol}")
    kw: dict[str, Any] = {"protocol": protocol}
    tls = protocol in ("SSL", "SASL_SSL")
    sasl = protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    for key in config:
        used = (tls and key.startswith(("ssl.", "enable.ssl."))) or key == "oauth_cb" \
            or (sasl and key.startswith(("sasl.", "enable.sasl.")))
        if not used or key in _READ:
            continue
        ok = _HARMLESS.get(key, ())
        if ok is None or (ok and str(get(key)).lower() in ok):
            continue
        raise ClientConfigError(f"{key}={get(key)}")
    if tls:
        _tls(get, kw)
    if sasl:
        _sasl(get, kw)
    sec = ClientSecurity(**kw)
    sec.check()  # the mechanism (GSSAPI is refused) and its credentials
    return sec


def _tls(get: Any, kw: dict[str, Any]) -> None:
    ca = get("ssl.ca.location")
    if ca:
        if ca == "probe" or os.path.isdir(ca):
            raise ClientConfigError(f"ssl.ca.location={ca} (a PEM file is needed)")
        kw["truststore_location"] = ca
    elif get("ssl.ca.pem"):
        kw["truststore_certificates"] = get("ssl.ca.pem")
    cert_file, key_file = get("ssl.certificate.location"), get("ssl.key.location")
    cert = get("ssl.certificate.pem") or (
        _read(cert_file, "ssl.certificate.location") if cert_file else None)
    key = get("ssl.key.pem") or (_read(key_file, "ssl.key.location") if key_file else None)
    if cert_file and cert_file == key_file:  # one PEM file, re-read for each connection
        kw["keystore_location"] = cert_file
    elif cert or key:
        if not (cert and key):
            raise ClientConfigError("ssl.certificate.* without ssl.key.* (or the reverse)")
        kw["keystore_certificate_chain"], kw["keystore_key"] = cert, key
    elif get("ssl.keystore.location"):
        kw.update(keystore_type="PKCS12", keystore_location=get("ssl.keystore.location"),
                  keystore_password=get("ssl.keystore.password"))
    if get("ssl.key.password"):
        kw["key_password"] = get("ssl.key.password")
    alg = (get("ssl.endpoint.identification.algorithm") or "https").lower()
    if alg not in ("https", "none"):
        raise ClientConfigError(f"ssl.endpoint.identification.algorithm={alg}")
    kw["endpoint_identification"] = "https" if alg == "https" else ""
    suites = get("ssl.cipher.suites")
    if suites:
        kw["cipher_suites"] = tuple(s for s in suites.replace(",", ":").split(":") if s.strip())


def _sasl(get: Any, kw: dict[str, Any]) -> None:
    mechanism = (get("sasl.mechanism") or get("sasl.mechanisms") or "GSSAPI").upper()
    kw["sasl_mechanism"] = mechanism
    if mechanism != "OAUTHBEARER":
        kw["username"], kw["password"] = get("sasl.username"), get("sasl.password")
        return
    if (get("sasl.oauthbearer.method") or "default").lower() != "default":
        raise ClientConfigError(f"sasl.oauthbearer.method={get('sasl.oauthbearer.method')}")
    if (get("enable.sasl.oauthbearer.unsecure.jwt") or "false").lower() not in ("true", "1"):
        raise ClientConfigError("sasl.mechanism=OAUTHBEARER without "
                                "enable.sasl.oauthbearer.unsecure.jwt (a token callback)")
    kw["jaas_options"] = _unsecured_login(get("sasl.oauthbearer.config") or "")


def _unsecured_login(text: str) -> dict[str, str]:
    """librdkafka's unsecured JWT options (``principal=... scope=a,b lifeSeconds=...
    principalClaimName=... scopeClaimName=... extension_NAME=...``) as Kafka's
    ``unsecuredLogin*`` JAAS options."""
    opts = dict(part.partition("=")[::2] for part in text.split() if part)
    principal_claim = opts.pop("principalClaimName", "sub")
    scope_claim = opts.pop("scopeClaimName", "scope")
    out = {"unsecuredLoginPrincipalClaimName": principal_claim,
           "unsecuredLoginScopeClaimName": scope_claim}
    if "principal" in opts:
        out[f"unsecuredLoginStringClaim_{principal_claim}"] = opts.pop("principal")
    if "scope" in opts:
        out[f"unsecuredLoginListClaim_{scope_claim}"] = "," + opts.pop("scope")
    if "lifeSeconds" in opts:
        out["unsecuredLoginLifetimeSeconds"] = opts.pop("lifeSeconds")
    for name in [n for n in opts if n.startswith("extension_")]:
        out[f"unsecuredLoginExtension_{name[len('extension_'):]}"] = opts.pop(name)
    if opts:
        raise ClientConfigError(f"sasl.oauthbearer.config: {sorted(opts)[0]}")
    return out


def _read(path: str, key: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ClientConfigError(f"{key}={path}: {getattr(e, 'strerror', None) or e}") from None


def assigned(assignment: bytes) -> list[tuple[str, list[int]]]:
    """A ``consumer`` protocol assignment's (topic, partitions); [] for none or one that
    does not parse."""
    if len(assignment) < 2:
        return []
    version = int.from_bytes(assignment[:2], "big", signed=True)
    if version < 0:
        return []
    try:
        msg, _ = ConsumerProtocolAssignment.decode(
            memoryview(assignment), 2, min(version, ConsumerProtocolAssignment.VALID_VERSIONS[1]))
    except Exception:  # noqa: BLE001 - a member of another protocol, or garbage
        return []
    return [(tp.topic, list(tp.partitions)) for tp in msg.assigned_partitions]


async def partition_holder(addresses: list[tuple[str, int]], security: ClientSecurity,
                           group_id: str, topic: str, partition: int = 0, *,
                           timeout: float = 5.0) -> str | None:
    """The client id of the member holding (topic, partition) (module doc)."""
    try:
        return await asyncio.wait_for(
            _holder(addresses, security, group_id, topic, partition, timeout), timeout)
    except (ClientError, OSError, TimeoutError):
        return None


async def _holder(addresses: list[tuple[str, int]], security: ClientSecurity, group_id: str,
                  topic: str, partition: int, timeout: float) -> str | None:
    ms = max(100, int(timeout * 1000))
    found = None
    for host, port in addresses:
        c = NodeClient(host, port, client_id=CLIENT_ID, security=security,
                       request_timeout_ms=ms, connect_timeout_ms=ms)
        try:
            found = await c.request(FindCoordinatorRequest(key=group_id, key_type=0), 3)
            break
        except (ClientError, OSError):
            continue  # that broker is away: the next one
        finally:
            await c.close()
    if found is None or found.error_code in RETRIABLE:
        return None
    if found.error_code:
        raise GroupWireError(f"FindCoordinator: {error_name(found.error_code)}"
                             + (f": {found.error_message}" if found.error_message else ""))
    coordinator = NodeClient(found.host, found.port, client_id=CLIENT_ID, security=security,
                             request_timeout_ms=ms, connect_timeout_ms=ms)
    try:
        resp = await coordinator.request(DescribeGroupsRequest(groups=[group_id]), 5)
    finally:
        with contextlib.suppress(Exception):
            await coordinator.close()
    [group] = resp.groups
    if group.error_code in RETRIABLE:
        return None
    if group.error_code:
        raise GroupWireError(f"DescribeGroups: {error_name(group.error_code)}")
    for member in group.members:
        for t, partitions in assigned(bytes(member.member_assignment)):
            if t == topic and partition in partitions:
                return member.client_id
    return None
