"""Dynamic broker configs on a single node: what Kafka 4.2 accepts on a BROKER resource.

AlterConfigs and IncrementalAlterConfigs (confluent-kafka's AdminClient, which sends
a broker id's keys to that broker) accept every key Kafka marks dynamic; the values
are stored in the metadata log and survive a restart, DescribeConfigs reports them
with their source (DYNAMIC_BROKER_CONFIG for the broker id, DYNAMIC_DEFAULT_BROKER_CONFIG
for the cluster-wide default, the empty name: confluent-kafka cannot name it, so a raw
client does), and the broker log says which ones Spool does not act on. Topic
defaults such as ``message.max.bytes`` reach topics without an override at once.
Keys that need a restart get Kafka's INVALID_REQUEST and message.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from spool.protocol._generated import AlterConfigsRequest, ApiVersionsRequest
from spool.protocol._generated import alter_configs_request as ac
from tests.helpers.broker_configs import raw_alter, raw_describe, raw_incremental
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def incremental(admin: AdminClient, broker: str, *ops: tuple[str, str | None, AlterConfigOpType]
                ) -> None:
    res = ConfigResource("broker", broker, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    admin.incremental_alter_configs([res])[res].result(10)


def described(admin: AdminClient, broker: str = "0") -> dict:
    res = ConfigResource("broker", broker)
    return admin.describe_configs([res])[res].result(10)


def produce_error(bootstrap: str, topic: str, size: int) -> KafkaError | None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.max.bytes": 10**6})
    got: list = []
    p.produce(topic, value=b"x" * size, on_delivery=lambda err, _msg: got.append(err))
    p.flush(10)
    return got[0]


def test_dynamic_keys_are_stored_described_applied_and_survive_a_restart(fresh_broker,
                                                                          topic_name):
    fresh_broker.log_level = "INFO"
    b = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    # the legacy API replaces broker 0's set; the issue's key among them
    res = ConfigResource("broker", "0", set_config={
        "sasl.kerberos.min.time.before.relogin": "120000", "log.cleaner.backoff.ms": "20000"})
    admin.alter_configs([res])[res].result(10)
    incremental(admin, "0", ("listener.name.plaintext.ssl.keystore.location", "/ks.jks", SET))
    assert raw_incremental(b.bootstrap, "", ("message.max.bytes", "2000", 0),
                           ("log.retention.ms", "3600000", 0)) == (0, None)

    def check() -> None:
        cfg = described(admin)
        assert {k: (cfg[k].value, cfg[k].source, cfg[k].is_read_only) for k in (
            "sasl.kerberos.min.time.before.relogin", "log.cleaner.backoff.ms",
            "listener.name.plaintext.ssl.keystore.location", "message.max.bytes",
            "log.retention.ms", "log.dirs")} == {
            "sasl.kerberos.min.time.before.relogin": ("120000", DYNAMIC_BROKER, False),
            "log.cleaner.backoff.ms": ("20000", DYNAMIC_BROKER, False),
            "listener.name.plaintext.ssl.keystore.location": ("/ks.jks", DYNAMIC_BROKER, False),
            "message.max.bytes": ("2000", DYNAMIC_DEFAULT, False),
            "log.retention.ms": ("3600000", DYNAMIC_DEFAULT, False),
            "log.dirs": (str(b.data_dir), ConfigSource.STATIC_BROKER_CONFIG.value, True)}
        cluster_default = raw_describe(b.bootstrap, "")
        assert cluster_default == {
            "log.retention.ms": ("3600000", DYNAMIC_DEFAULT, False, False,
                                 [("log.retention.ms", "3600000", DYNAMIC_DEFAULT)]),
            "message.max.bytes": ("2000", DYNAMIC_DEFAULT, False, False,
                                  [("message.max.bytes", "2000", DYNAMIC_DEFAULT)])}
        assert raw_describe(b.bootstrap, "0")["log.retention.ms"][4] == [
            ("log.retention.ms", "3600000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value)]
        topic = ConfigResource("topic", topic_name)
        entry = admin.describe_configs([topic])[topic].result(10)["max.message.bytes"]
        assert (entry.value, entry.source) == ("2000", DYNAMIC_DEFAULT)
        err = produce_error(b.bootstrap, topic_name, 5000)
        assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE

    check()
    b.stop()
    b.start()
    check()
    log = b.log_path.read_text()
    assert ("dynamic config sasl.kerberos.min.time.before.relogin=120000 is stored and "
            "reported, but Spool does not act on it") in log
    assert "dynamic config message.max.bytes=2000 applied" in log
    assert raw_incremental(b.bootstrap, "", ("message.max.bytes", None, 1)) == (0, None)
    assert produce_error(b.bootstrap, topic_name, 5000) is None
    assert "message.max.bytes" not in raw_describe(b.bootstrap, "")


@pytest.mark.parametrize(("name", "configs", "message"), [
    ("0", {"log.dirs": "/elsewhere"}, "Cannot update these configs dynamically: Set(log.dirs)"),
    # a Kafka key Spool does not define: read-only in Kafka, refused as Kafka refuses it
    ("0", {"socket.send.buffer.bytes": "1", "authorizer.class.name": "x"},
     "Cannot update these configs dynamically: Set(authorizer.class.name, "
     "socket.send.buffer.bytes)"),
    # only the first synonym of a topic default is dynamic, as in Kafka
    ("0", {"log.retention.hours": "1"},
     "Cannot update these configs dynamically: Set(log.retention.hours)"),
    ("", {"sasl.kerberos.min.time.before.relogin": "1"},
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(sasl.kerberos.min.time.before.relogin)"),
    ("0", {"ssl.keystore.location": "/ks.jks"},
     "These security configs can be dynamically updated only per-listener using the "
     "listener prefix: Set(ssl.keystore.location)"),
    ("0", {"num.io.threads": "100"},
     "Dynamic thread count update validation failed for num.io.threads=100, value should "
     "not be greater than double the current value 8"),
    ("0", {"log.retention.ms": "soon"}, "log.retention.ms=soon: expected an integer >= -1"),
    ("7", {"log.retention.ms": "1"}, "Unexpected broker id, expected 0, but received 7"),
])
def test_keys_kafka_refuses_are_invalid_request(broker, name, configs, message):
    before = raw_describe(broker.bootstrap, "0")
    assert raw_alter(broker.bootstrap, name, configs) == (KafkaError.INVALID_REQUEST, message)
    assert raw_describe(broker.bootstrap, "0") == before


def test_a_key_nobody_defines_is_kept_hidden_and_named_in_the_log(fresh_broker):
    b = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    incremental(admin, "0", ("log.retention.msx", "5", SET))  # Kafka keeps custom keys
    entry = described(admin)["log.retention.msx"]
    assert (entry.value, entry.source, entry.is_sensitive) == (None, DYNAMIC_BROKER, True)
    assert ("dynamic config log.retention.msx=[hidden] is not a known config: kept for "
            "plugins, Spool does not read it (did you mean 'log.retention.ms'?)"
            ) in b.log_path.read_text()
    incremental(admin, "0", ("log.retention.msx", None, DELETE))
    assert "log.retention.msx" not in described(admin)


def test_passwords_are_never_shown(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    incremental(admin, "0", ("listener.name.plaintext.ssl.key.password", "secret", SET))
    try:
        entry = described(admin)["listener.name.plaintext.ssl.key.password"]
        assert (entry.value, entry.is_sensitive, entry.source) == (None, True, DYNAMIC_BROKER)
    finally:
        incremental(admin, "0", ("listener.name.plaintext.ssl.key.password", None, DELETE))
    with pytest.raises(KafkaException) as e:
        incremental(admin, "0", ("log.dirs", "/x", SET))
    assert e.value.args[0].code() == KafkaError.INVALID_REQUEST


def served(bootstrap: str, timeout: float = 10.0) -> RawClient:
    """A connection the broker answers (retrying while it refuses this address)."""
    deadline = time.monotonic() + timeout
    while True:
        c = RawClient(bootstrap)
        try:
            c.request(18, 0, ApiVersionsRequest())
            return c
        except OSError:
            c.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_connection_limits_take_effect_without_a_restart(fresh_broker):
    """max.connections.per.ip lowered to 1: a second connection from this address is closed
    at once; deleted: it is served again. Open connections stay, as in Kafka."""
    b = fresh_broker.start()
    assert raw_alter(b.bootstrap, "0", {"max.connections.per.ip": "1"}) == (0, None)
    first = served(b.bootstrap)  # once the broker has let the previous connection go
    try:
        second = RawClient(b.bootstrap)
        try:
            with pytest.raises((ConnectionError, OSError, EOFError)):
                second.request(18, 0, ApiVersionsRequest())
        finally:
            second.close()
        resp = first.request(33, 2, AlterConfigsRequest(validate_only=False, resources=[
            ac.AlterConfigsResource(resource_type=4, resource_name="0", configs=[])]))
        assert resp.responses[0].error_code == 0  # the legacy API: an empty set deletes all
    finally:
        first.close()
    a, c = RawClient(b.bootstrap), RawClient(b.bootstrap)
    try:
        assert a.request(18, 0, ApiVersionsRequest()).error_code == 0
        assert c.request(18, 0, ApiVersionsRequest()).error_code == 0
    finally:
        a.close()
        c.close()


def test_append_to_a_broker_list_starts_from_its_default(broker):
    """As Kafka: APPEND on a key with no dynamic value starts from the key's default."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    incremental(admin, "0", ("sasl.enabled.mechanisms", "PLAIN",
                             AlterConfigOpType.APPEND))
    try:
        entry = described(admin)["sasl.enabled.mechanisms"]
        assert (entry.value, entry.source) == ("GSSAPI,PLAIN", DYNAMIC_BROKER)
        incremental(admin, "0", ("sasl.enabled.mechanisms", "GSSAPI,PLAIN",
                                 AlterConfigOpType.SUBTRACT))
        assert described(admin)["sasl.enabled.mechanisms"].value == ""
    finally:
        incremental(admin, "0", ("sasl.enabled.mechanisms", None, DELETE))
    assert described(admin)["sasl.enabled.mechanisms"].source == ConfigSource.DEFAULT_CONFIG.value
