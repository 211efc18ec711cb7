"""Two ``spool registry`` processes against one Spool broker: what a user of either sees.

A schema registered through one is served by the other at once (no waiting: a read that
misses catches up with ``_schemas`` first); a write through the instance that is not the
primary is forwarded to the primary and answered with its answer (ids and errors); the
primary killed with SIGKILL, the other takes over writing once the group has timed the
dead one out, with ids continuing where they were; one stopped with SIGTERM hands over at
once, and one joining takes nothing from the primary; a paused primary that comes back
after another took over is fenced: its writes go to the new primary; one that has read
no primary's announcement (deleted) finds the primary in the group and forwards to it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from tests.helpers.cluster_proc import Cluster
from tests.helpers.registry_proc import RegistryProcess, ask
from tests.helpers.secure_broker import SCRAM_LOGIN, SecureBroker

pytestmark = pytest.mark.timeout(180)

GROUP = "schema-registry"


def avro(*fields: str) -> str:
    return json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": f, "type": "string", "default": ""} for f in fields]})


@pytest.fixture
def cluster(fresh_broker, tmp_path):
    fresh_broker.start()
    started: list[RegistryProcess] = []

    def start() -> RegistryProcess:
        r = RegistryProcess(fresh_broker.bootstrap, tmp_path / f"registry{len(started)}.log")
        started.append(r)
        return r.start()

    a, b = start(), start()
    yield fresh_broker, a, b, start
    # SIGTERM: a clean exit (a killed one's code stays -9)
    codes = [(r.proc.returncode if r.proc.poll() is not None else r.stop()) for r in started]
    assert all(c in (0, -signal.SIGKILL) for c in codes), codes


def primary_url(bootstrap: str, timeout: float = 30.0, conf: dict | None = None) -> str:
    """The advertised URL of the group member that holds _schemas' partition: as a user
    finds it (``spool groups describe schema-registry``), waiting out a rebalance."""
    admin = AdminClient(conf or {"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        group = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
        for m in group.members:
            if m.assignment and any(tp.partition == 0 for tp in m.assignment.topic_partitions):
                return m.client_id
        time.sleep(0.1)
    raise AssertionError(f"no member of {GROUP} holds _schemas within {timeout} s")


def _committed(bootstrap: str, conf: dict | None = None) -> list:
    """Every committed message of _schemas, in offset order."""
    c = Consumer({"bootstrap.servers": bootstrap, **(conf or {}), "group.id": "test-reader",
                  "log_level": 0, "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    c.assign([TopicPartition("_schemas", 0, 0)])
    out = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                break  # end of partition
            out.append(m)
    finally:
        c.close()
    return out


def schema_records(bootstrap: str) -> list[tuple[dict, dict | None]]:
    """Every committed record of _schemas, keys and values decoded."""
    return [(json.loads(m.key()), None if m.value() is None else json.loads(m.value()))
            for m in _committed(bootstrap)]


def announcements(bootstrap: str, conf: dict | None = None) -> list[str]:
    """The primaries' URLs in the order they announced themselves on _schemas (the
    spool.registry.primary header of the NOOP each writes once it has fenced the last)."""
    headers = (dict(m.headers() or ()) for m in _committed(bootstrap, conf))
    return [h["spool.registry.primary"].decode() for h in headers
            if "spool.registry.primary" in h]


def register(url: str, subject: str, schema: str, timeout: float = 60.0) -> tuple[int, dict]:
    return ask("POST", f"{url}/subjects/{subject}/versions", {"schema": schema}, timeout)


def register_retried(url: str, subject: str, schema: str,
                     within: float = 150.0) -> tuple[int, dict]:
    """``register``, again after a timeout or a 5xx answer, until ``within`` seconds pass."""
    deadline = time.monotonic() + within
    while True:
        try:
            answer = register(url, subject, schema, 30)
            if answer[0] < 500 or time.monotonic() > deadline:
                return answer
        except OSError:  # the answer did not come within 30 s
            if time.monotonic() > deadline:
                raise
        time.sleep(1)


def test_a_schema_registered_through_one_is_served_by_the_other_at_once(cluster):
    _, a, b, _ = cluster
    for writer, reader, subject in ((a, b, "orders-value"), (b, a, "payments-value")):
        status, answer = register(writer.url, subject, avro("id"))
        assert status == 200, answer
        schema_id = answer["id"]
        # no polling: the very next request to the other instance has it
        assert ask("GET", f"{reader.url}/schemas/ids/{schema_id}") == (200, {"schema": avro("id")})
        assert ask("GET", f"{reader.url}/subjects/{subject}/versions/latest") == (
            200, {"subject": subject, "version": 1, "id": schema_id, "schema": avro("id")})
    # the same schema under another subject: the same id, wherever it was registered
    assert ask("GET", f"{a.url}/schemas/ids/1/versions") == (200, [
        {"subject": "orders-value", "version": 1}, {"subject": "payments-value", "version": 1}])
    assert ask("GET", f"{b.url}/subjects") == (200, ["orders-value", "payments-value"])


def test_writes_through_the_non_primary_are_forwarded(cluster):
    broker, a, b, _ = cluster
    primary = primary_url(broker.bootstrap)
    assert primary in (a.url, b.url)
    other = b if primary == a.url else a
    status, answer = register(other.url, "orders-value", avro("id"))
    assert (status, answer) == (200, {"id": 1})
    # read-your-writes on the instance that forwarded
    assert ask("GET", f"{other.url}/subjects/orders-value/versions") == (200, [1])
    status, answer = register(other.url, "orders-value", avro("id", "total"))
    assert (status, answer) == (200, {"id": 2})
    # the primary's refusals come back as they are: an incompatible change (a field
    # without a default removed... here: one of another type, under BACKWARD) is 409
    incompatible = json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "int"}]})
    status, answer = register(other.url, "orders-value", incompatible)
    assert status == 409 and answer["error_code"] == 409, answer
    status, answer = ask("PUT", f"{other.url}/config/orders-value", {"compatibility": "NONE"})
    assert (status, answer) == (200, {"compatibility": "NONE"})
    assert ask("GET", f"{other.url}/config/orders-value") == (
        200, {"compatibilityLevel": "NONE"})
    assert register(other.url, "orders-value", incompatible) == (200, {"id": 3})
    status, answer = ask("DELETE", f"{other.url}/subjects/orders-value/versions/1")
    assert (status, answer) == (200, 1)
    assert ask("GET", f"{other.url}/subjects/orders-value/versions") == (200, [2, 3])
    # each write is on the topic once: the forwarding did not write it twice
    schemas = [(k["subject"], k["version"], v["id"], v["deleted"])
               for k, v in schema_records(broker.bootstrap) if k["keytype"] == "SCHEMA"]
    assert schemas == [("orders-value", 1, 1, False), ("orders-value", 2, 2, False),
                       ("orders-value", 3, 3, False), ("orders-value", 1, 1, True)]


def test_killing_the_primary_hands_writing_to_the_other(cluster):
    broker, a, b, _ = cluster
    assert register(a.url, "orders-value", avro("id")) == (200, {"id": 1})
    primary = primary_url(broker.bootstrap)
    dead, survivor = (a, b) if primary == a.url else (b, a)
    dead.kill()
    started = time.monotonic()
    # the write waits out the dead member's session (6 s) and the rebalance, not fails
    status, answer = register(survivor.url, "orders-value", avro("id", "total"))
    took = time.monotonic() - started
    assert (status, answer) == (200, {"id": 2}), answer
    assert took < 30, took
    assert primary_url(broker.bootstrap) == survivor.url
    assert announcements(broker.bootstrap) == [dead.url, survivor.url]
    assert ask("GET", f"{survivor.url}/subjects/orders-value/versions") == (200, [1, 2])
    assert register(survivor.url, "payments-value", avro("x")) == (200, {"id": 3})


def test_a_paused_primary_that_comes_back_is_fenced(cluster):
    broker, a, b, _ = cluster
    assert register(a.url, "orders-value", avro("id")) == (200, {"id": 1})
    primary = primary_url(broker.bootstrap)
    paused, other = (a, b) if primary == a.url else (b, a)
    os.kill(paused.proc.pid, signal.SIGSTOP)
    try:
        # the other takes over while the paused one still believes it writes
        assert register(other.url, "orders-value", avro("id", "total")) == (200, {"id": 2})
        assert primary_url(broker.bootstrap) == other.url
    finally:
        os.kill(paused.proc.pid, signal.SIGCONT)
    # a write through the one that was paused goes to the new primary: no second id 2
    status, answer = register(paused.url, "payments-value", avro("x"))
    assert (status, answer) == (200, {"id": 3}), answer
    assert ask("GET", f"{paused.url}/schemas/ids/2") == (200, {"schema": avro("id", "total")})
    ids = sorted(v["id"] for k, v in schema_records(broker.bootstrap)
                 if k["keytype"] == "SCHEMA" and v is not None)
    assert ids == [1, 2, 3]


def test_a_registry_without_a_cluster_says_so(tmp_path):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    r = RegistryProcess(f"127.0.0.1:{port}", tmp_path / "registry.log", "--timeout", "1")
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="registry exited with 1"):
        r.start()
    assert time.monotonic() - started < 20
    lines = r.log_tail().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "spool: the registry did not start: Operation timed out: creating _schemas"), lines


def test_concurrent_writes_through_both_get_distinct_ids(cluster):
    _, a, b, _ = cluster
    schemas = [avro(f"f{i}") for i in range(24)]

    def one(i: int) -> tuple[int, dict]:
        via = (a, b)[i % 2]
        return register(via.url, f"s{i}-value", schemas[i % 12])  # each schema twice

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(24)))
    assert all(status == 200 for status, _ in answers), answers
    ids = [answer["id"] for _, answer in answers]
    # a schema has one id whichever subject and instance it came through; 12 schemas, 12 ids
    assert sorted(set(ids)) == list(range(1, 13))
    assert all(ids[i] == ids[i + 12] for i in range(12))
    for r in (a, b):
        for i in range(24):
            assert ask("GET", f"{r.url}/subjects/s{i}-value/versions/1")[1]["id"] == ids[i]


def test_instances_joining_leave_the_primary_and_a_stopped_one_hands_over_at_once(cluster):
    broker, a, b, start = cluster
    assert register(a.url, "orders-value", avro("id")) == (200, {"id": 1})
    primary = primary_url(broker.bootstrap)
    c = start()  # cooperative-sticky: the newcomer takes nothing from the primary
    assert register(c.url, "orders-value", avro("id", "total")) == (200, {"id": 2})
    assert primary_url(broker.bootstrap) == primary
    leaving = a if primary == a.url else b
    assert leaving.stop() == 0  # SIGTERM: it leaves the group, no session to wait out
    started = time.monotonic()
    assert register(c.url, "payments-value", avro("x")) == (200, {"id": 3})
    assert time.monotonic() - started < 5
    assert primary_url(broker.bootstrap) in {a.url, b.url, c.url} - {leaving.url}


def test_deletes_through_one_are_seen_by_the_other(cluster):
    """Null-valued records (a config or mode removed, a permanent delete's tombstone)
    are applied as the others are: one lost would leave the other instance stale."""
    _, a, b, _ = cluster
    assert register(a.url, "orders-value", avro("id")) == (200, {"id": 1})
    assert register(a.url, "orders-value", avro("id", "total")) == (200, {"id": 2})
    for writer, reader in ((a, b), (b, a)):
        assert ask("PUT", f"{writer.url}/config/orders-value", {"compatibility": "FULL"})[0] == 200
        assert ask("GET", f"{reader.url}/config/orders-value") == (
            200, {"compatibilityLevel": "FULL"})
        assert ask("DELETE", f"{writer.url}/config/orders-value") == (
            200, {"compatibilityLevel": "FULL"})
        status, answer = ask("GET", f"{reader.url}/config/orders-value")
        assert (status, answer["error_code"]) == (404, 40408), answer
        assert ask("PUT", f"{writer.url}/mode/orders-value", {"mode": "READONLY"})[0] == 200
        assert ask("DELETE", f"{writer.url}/mode/orders-value") == (200, {"mode": "READONLY"})
        status, answer = ask("GET", f"{reader.url}/mode/orders-value")
        assert (status, answer["error_code"]) == (404, 40409), answer
    assert ask("DELETE", f"{b.url}/subjects/orders-value/versions/1") == (200, 1)
    assert ask("DELETE", f"{b.url}/subjects/orders-value/versions/1?permanent=true") == (200, 1)
    assert ask("GET", f"{a.url}/subjects/orders-value/versions?deleted=true") == (200, [2])
    status, answer = ask("GET", f"{a.url}/schemas/ids/1")
    assert (status, answer["error_code"]) == (404, 40403), answer



@pytest.fixture(params=["PLAINTEXT", "SASL_SSL"])
def own_cluster(request, tmp_path):
    """A broker of the test's own: (bootstrap, a librdkafka admin config, the registry's
    extra arguments). SASL_SSL: SCRAM-SHA-512 over TLS, the registry's --command-config
    in Kafka's client properties (a PEM truststore)."""
    if request.param == "PLAINTEXT":
        broker = request.getfixturevalue("fresh_broker").start()
        yield broker.bootstrap, {"bootstrap.servers": broker.bootstrap, "log_level": 0}, []
        return
    broker = SecureBroker(tmp_path / "data", listeners=("SASL_SSL",),
                          scram_users={"registry": "registry-secret"})
    try:
        broker.start()
        assert broker.pki is not None
        config = tmp_path / "registry.properties"
        config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                          f'sasl.jaas.config={SCRAM_LOGIN} required username="registry" '
                          'password="registry-secret";\n'
                          f"ssl.truststore.type=PEM\nssl.truststore.location={broker.pki.ca_pem}\n")
        yield (broker.bootstrap(), broker.confluent("admin", log_level=0),
               ["--command-config", str(config)])
    finally:
        broker.stop()


def test_a_primary_whose_announcement_is_gone_is_found_in_the_group(own_cluster, tmp_path):
    """No primary announced on _schemas (the NOOP naming it is a tombstone: compaction
    removes it; here its records are deleted): an instance started then has read no
    announcement, asks the group which member holds the partition (over Spool's own
    client, with the registry's security settings), and forwards its writes there."""
    bootstrap, conf, extra = own_cluster
    admin = AdminClient(conf)
    # compact,delete: Kafka refuses DeleteRecords on a topic that is only compacted
    admin.create_topics([NewTopic("_schemas", 1, 1, config={
        "cleanup.policy": "compact,delete", "retention.ms": "-1"})])["_schemas"].result(10)
    registries: list[RegistryProcess] = []
    try:
        registries.append(RegistryProcess(bootstrap, tmp_path / "a.log", *extra).start())
        a = registries[0]
        assert register(a.url, "orders-value", avro("id")) == (200, {"id": 1})
        assert announcements(bootstrap, conf) == [a.url]
        [part] = admin.list_offsets({TopicPartition("_schemas", 0): OffsetSpec.latest()}
                                    ).values()
        end = part.result(10).offset
        [done] = admin.delete_records([TopicPartition("_schemas", 0, end)]).values()
        assert done.result(10).low_watermark == end
        assert announcements(bootstrap, conf) == []
        registries.append(RegistryProcess(bootstrap, tmp_path / "b.log", *extra).start())
        b = registries[1]
        # b read nothing, a is still the primary (cooperative-sticky): b's write goes to a
        assert register(b.url, "payments-value", avro("x")) == (200, {"id": 2}), b.log_tail()
        assert primary_url(bootstrap, conf=conf) == a.url
        log = b.log_path.read_text()
        assert f"group {GROUP} says {a.url} is the primary" in log
        assert "librdkafka's admin client" not in log  # asked over Spool's own client
        assert ask("GET", f"{b.url}/subjects/payments-value/versions") == (200, [1])
        assert ask("GET", f"{a.url}/schemas/ids/1") == (200, {"schema": avro("id")})
        assert announcements(bootstrap, conf) == []  # a wrote no second announcement
    finally:
        codes = [r.stop() for r in registries]
    assert codes == [0] * len(codes)

@pytest.mark.timeout(480)  # three brokers, two registries, two failover writes of up to 150 s
def test_on_a_three_node_cluster_the_leader_of_schemas_can_die(tmp_path):
    """_schemas gets 3 replicas, compacted; its leader killed, writes and reads go on."""
    nodes = Cluster(tmp_path / "cluster", proxied=False)
    registries: list[RegistryProcess] = []
    try:
        nodes.start()
        bootstrap = ",".join(n.bootstrap for n in nodes.brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=10).brokers) < 3:  # every broker registered
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for i in range(2):
            registries.append(RegistryProcess(bootstrap, tmp_path / f"r{i}.log").start())
        a, b = registries
        topic = admin.list_topics(timeout=10).topics["_schemas"]
        assert len(topic.partitions) == 1 and len(topic.partitions[0].replicas) == 3
        resource = ConfigResource(ConfigResource.Type.TOPIC, "_schemas")
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["cleanup.policy"].value == "compact"
        assert register(a.url, "orders-value", avro("id")) == (200, {"id": 1})
        leader = topic.partitions[0].leader
        next(n for n in nodes.brokers if n.node_id == leader).kill()
        logs = lambda: "\n".join(r.log_tail() for r in registries)  # noqa: E731
        # as a client would: retried until the cluster has moved the leaderships (a
        # registration is idempotent: one that timed out but was written gives the same id)
        assert register_retried(b.url, "orders-value", avro("id", "total")) == (
            200, {"id": 2}), logs()
        assert register_retried(a.url, "payments-value", avro("x")) == (
            200, {"id": 3}), logs()
        for r in (a, b):
            assert ask("GET", f"{r.url}/subjects/orders-value/versions") == (200, [1, 2])
    finally:
        for r in registries:
            r.stop()
        nodes.stop()
