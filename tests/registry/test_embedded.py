"""The broker with ``schema.registry.listeners`` serves the registry's API itself.

The broker prints ``spool registry listening on http://HOST:PORT (registry)`` once the
registry has read ``_schemas``; schemas registered there survive a restart of the
broker (they are records of the topic, read back at start); SIGTERM stops both cleanly;
an address the registry cannot bind stops the broker from starting, naming it; the
broker's registry and a ``spool registry`` share one group, writes forwarded to the
broker's at its ``schema.registry.advertised.url``.
"""

from __future__ import annotations

import json
import re
import socket
import time

import pytest
from confluent_kafka.admin import AdminClient

from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.registry_proc import RegistryProcess, ask

pytestmark = pytest.mark.timeout(120)

LINE = re.compile(r"^spool registry listening on (http://\S+) \(registry\)$")
SCHEMA = json.dumps({"type": "record", "name": "Order",
                     "fields": [{"name": "id", "type": "string"}]})


def registry_url(broker: BrokerProcess, timeout: float = 60.0) -> str:
    """The URL from the broker's stdout line (printed after its listeners' lines)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(broker.stdout_lines):
            m = LINE.match(line)
            if m:
                return m.group(1)
        if broker.proc is not None and broker.proc.poll() is not None:
            raise AssertionError(f"broker exited: {broker.log_tail()}")
        time.sleep(0.05)
    raise AssertionError(f"no registry line within {timeout} s: {broker.stdout_lines}")


def test_the_broker_serves_the_registry(tmp_path):
    broker = BrokerProcess(tmp_path / "data",
                           {"schema.registry.listeners": "http://127.0.0.1:0"})
    broker.start()
    try:
        url = registry_url(broker)
        assert [line for line in broker.stdout_lines if LINE.match(line)] == [
            f"spool registry listening on {url} (registry)"]
        assert ask("POST", f"{url}/subjects/orders-value/versions",
                    {"schema": SCHEMA}) == (200, {"id": 1})
        assert ask("GET", f"{url}/schemas/ids/1") == (200, {"schema": SCHEMA})
        assert ask("GET", f"{url}/subjects") == (200, ["orders-value"])
        assert ask("GET", f"{url}/nope")[0] == 404
        assert broker.stop() == 0
        # a second life of the broker: the registry reads the schema back from _schemas
        broker.start()
        url = registry_url(broker)
        assert ask("GET", f"{url}/subjects/orders-value/versions/1") == (
            200, {"subject": "orders-value", "version": 1, "id": 1, "schema": SCHEMA})
        assert ask("POST", f"{url}/subjects/payments-value/versions",
                    {"schema": SCHEMA}) == (200, {"id": 1})
    finally:
        assert broker.stop() == 0


def test_an_address_the_registry_cannot_bind_stops_the_broker(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    broker = BrokerProcess(tmp_path / "data",
                           {"schema.registry.listeners": f"http://127.0.0.1:{port}"})
    try:
        with pytest.raises(RuntimeError, match="broker exited with 1"):
            broker.start()
        assert f"registry: cannot listen on 127.0.0.1:{port}: Address already in use" in (
            broker.log_tail())
    finally:
        broker.stop()
        taken.close()


def test_a_malformed_listener_is_refused_at_start(tmp_path):
    broker = BrokerProcess(tmp_path / "data", {"schema.registry.listeners": "127.0.0.1:8081"})
    try:
        with pytest.raises(RuntimeError, match="broker exited with"):
            broker.start()
        assert "schema.registry.listeners" in broker.log_tail()
    finally:
        broker.stop()


def test_the_brokers_registry_and_a_standalone_one_share_the_writing(tmp_path):
    """One group: the broker's registry (the first member: the primary) is found at its
    schema.registry.advertised.url, and a standalone one forwards writes there."""
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    advertised = f"http://localhost:{port}"
    broker = BrokerProcess(tmp_path / "data", {
        "schema.registry.listeners": f"http://127.0.0.1:{port}",
        "schema.registry.advertised.url": advertised})
    broker.start()
    other = None
    try:
        url = registry_url(broker)
        assert url == f"http://127.0.0.1:{port}"
        assert ask("POST", f"{url}/subjects/orders-value/versions",
                    {"schema": SCHEMA}) == (200, {"id": 1})
        other = RegistryProcess(broker.bootstrap, tmp_path / "registry.log").start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        deadline = time.monotonic() + 30
        while True:  # the second member's join: a rebalance, when no one holds it
            group = admin.describe_consumer_groups(["schema-registry"])["schema-registry"]
            members = group.result(10).members
            holders = [m.client_id for m in members
                       if any(tp.partition == 0 for tp in m.assignment.topic_partitions)]
            if (len(members), holders) == (2, [advertised]) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert holders == [advertised]
        assert ask("POST", f"{other.url}/subjects/payments-value/versions",
                    {"schema": SCHEMA.replace("Order", "Payment")}) == (200, {"id": 2})
        assert ask("GET", f"{url}/subjects") == (200, ["orders-value", "payments-value"])
    finally:
        if other is not None:
            assert other.stop() == 0
        assert broker.stop() == 0
