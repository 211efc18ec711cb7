"""``connection_creation_rate`` quotas for IP entities, on a real broker (Kafka's
ConnectionQuotas): a connection over its IP's rate is refused at accept (held for the
throttle time, then closed, nothing answered) and the broker keeps serving everyone else.

The broker listens on 127.0.0.1 and [::1], so one address can be limited while the other
sets and removes the quota. With Kafka's defaults (11 windows of 1 s) a rate of 1 lets a
fresh IP open 10 connections at once (``quota * (num - 1) * size``); the 11th is refused.
"""

from __future__ import annotations

import pytest

from spool.protocol._generated import AlterClientQuotasRequest, ApiVersionsRequest
from spool.protocol._generated.alter_client_quotas_request import EntityData, EntryData, OpData
from spool.protocol.errors import Errors
from tests.helpers.broker_configs import raw_incremental
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.ports import ipv6_loopback
from tests.helpers.raw_client import RawClient, request_once

RATE = 1
BURST = RATE * (11 - 1)  # quota * (quota.window.num - 1) * quota.window.size.seconds


pytestmark = pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback on this machine")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("connq") / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,V6://[::1]:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT"}, log_level="INFO")
    b.start()
    yield b
    b.stop()


def _v4(broker) -> str:
    return broker.bootstrap


def _v6(broker) -> str:
    return f"::1:{broker.listener_ports['V6']}"


def _set_rate(via: str, ip: str, rate: float | None) -> None:
    op = OpData(key="connection_creation_rate", value=rate or 0.0, remove=rate is None)
    resp = request_once(via, 49, 1, AlterClientQuotasRequest(entries=[EntryData(
        entity=[EntityData(entity_type="ip", entity_name=ip)], ops=[op])], validate_only=False))
    assert resp.entries[0].error_code == Errors.NONE, resp.entries[0].error_message


def _served(c: RawClient) -> bool:
    return c.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                               client_software_version="1")).error_code == 0


def _open_until_refused(bootstrap: str, most: int) -> tuple[list[RawClient], RawClient | None]:
    """Connections served in a row, and the first one refused (None if none was)."""
    served: list[RawClient] = []
    for _ in range(most):
        c = RawClient(bootstrap)
        try:
            assert _served(c)
        except ConnectionError:  # closed unanswered (after the throttle time)
            return served, c
        served.append(c)
    return served, None


def test_an_ip_over_its_rate_is_refused_at_accept_and_the_rest_is_served(broker):
    _set_rate(_v6(broker), "127.0.0.1", RATE)
    served, refused = _open_until_refused(_v4(broker), BURST + 5)
    try:
        assert len(served) == BURST and refused is not None
        assert _served(RawClient(_v6(broker)))  # another IP: served
        for c in served:  # the connections accepted before keep being served
            assert _served(c)
    finally:
        for c in served + ([refused] if refused else []):
            c.close()
        _set_rate(_v6(broker), "127.0.0.1", None)
    log = broker.log_tail(10**6)
    assert "connection_creation_rate of ip 127.0.0.1 exceeded" in log
    # removed: 127.0.0.1 is no longer counted
    more, none = _open_until_refused(_v4(broker), BURST + 2)
    for c in more:
        c.close()
    assert (len(more), none) == (BURST + 2, None)


def test_an_ipv6_entity_in_any_form_limits_its_client(broker):
    _set_rate(_v4(broker), "::1", RATE)  # the client's address is 0:0:0:0:0:0:0:1
    served, refused = _open_until_refused(_v6(broker), BURST + 5)
    try:
        assert len(served) == BURST and refused is not None
    finally:
        for c in served + ([refused] if refused else []):
            c.close()
        _set_rate(_v4(broker), "::1", None)


@pytest.fixture(scope="module")
def rate_limited(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("connrate") / "data",
                      {"max.connection.creation.rate": str(RATE)}, log_level="INFO")
    b.start()
    yield b
    b.stop()


def test_max_connection_creation_rate_delays_accepting_and_refuses_nothing(rate_limited):
    """Kafka's broker-wide rate: over it the acceptor waits (at most one window) before
    serving the connection; no connection is closed for it."""
    served, refused = _open_until_refused(rate_limited.bootstrap, BURST + 2)
    try:
        assert (len(served), refused) == (BURST + 2, None)
    finally:
        for c in served:
            c.close()
    assert "max.connection.creation.rate=1 reached: PLAINTEXT waits" in rate_limited.log_tail(
        10**6)


def test_max_connection_creation_rate_set_while_running_takes_effect(broker):
    assert raw_incremental(_v6(broker), "", ("max.connection.creation.rate", str(RATE), 0)) \
        == (0, None)
    try:
        served, refused = _open_until_refused(_v4(broker), BURST + 2)
        for c in served:
            c.close()
        assert (len(served), refused) == (BURST + 2, None)
        assert "max.connection.creation.rate=1 reached: PLAINTEXT waits" in broker.log_tail(
            10**6)
    finally:
        assert raw_incremental(_v6(broker), "", ("max.connection.creation.rate", None, 1)) \
            == (0, None)
