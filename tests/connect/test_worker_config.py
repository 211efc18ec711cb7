"""WorkerConfig: Kafka Connect's worker keys, defaults, errors and derived client configs."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

from spool.connect.api import ConfigError
from spool.connect.worker_config import WorkerConfig

DISTRIBUTED = {
    "bootstrap.servers": "127.0.0.1:9092",
    "group.id": "connect-cluster",
    "config.storage.topic": "connect-configs",
    "offset.storage.topic": "connect-offsets",
    "status.storage.topic": "connect-status",
}


def _props_file(tmp_path, props: dict[str, str]) -> str:
    path = tmp_path / "worker.properties"
    path.write_text("# a worker\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def test_distributed_defaults_are_kafkas(tmp_path):
    w = WorkerConfig.load(_props_file(tmp_path, DISTRIBUTED), [], standalone=False)
    assert w.get("group.id") == "connect-cluster"
    assert w.get("offset.flush.interval.ms") == 60000
    assert w.get("offset.flush.timeout.ms") == 5000
    assert w.get("session.timeout.ms") == 10000
    assert w.get("heartbeat.interval.ms") == 3000
    assert w.get("offset.storage.partitions") == 25
    assert w.get("status.storage.partitions") == 5
    assert w.get("offset.storage.replication.factor") == -1
    assert w.get("exactly.once.source.support") == "disabled"
    assert w.get("connector.client.config.override.policy") == "All"
    assert w.get("key.converter") == "org.apache.kafka.connect.json.JsonConverter"
    assert w.get("header.converter") == "org.apache.kafka.connect.storage.SimpleHeaderConverter"
    assert w.rest_listen == ("127.0.0.1", 8083)
    assert w.rest_url == "http://127.0.0.1:8083"
    assert w.worker_id == "127.0.0.1:8083"
    assert not w.standalone


def test_overrides_win_and_values_are_typed(tmp_path):
    path = _props_file(tmp_path, {**DISTRIBUTED, "offset.flush.interval.ms": "60000"})
    w = WorkerConfig.load(path, ["offset.flush.interval.ms=500", "listeners=http://0.0.0.0:18083",
                                 "rest.advertised.host.name=worker-1",
                                 "exactly.once.source.support=enabled"], standalone=False)
    assert w.get("offset.flush.interval.ms") == 500
    assert w.rest_listen == ("0.0.0.0", 18083)
    assert w.rest_url == "http://worker-1:18083"
    assert w.worker_id == "worker-1:18083"
    assert w.get("exactly.once.source.support") == "enabled"


def test_an_ephemeral_port_and_an_ipv6_listener():
    w = WorkerConfig.from_props({**DISTRIBUTED, "listeners": "http://127.0.0.1:0"},
                                standalone=False)
    assert w.rest_listen == ("127.0.0.1", 0)
    v6 = WorkerConfig.from_props({**DISTRIBUTED, "listeners": "http://[::1]:18083"},
                                 standalone=False)
    assert v6.rest_listen == ("::1", 18083)
    assert v6.rest_url == "http://[::1]:18083"
    assert v6.worker_id == "::1:18083"


def test_deprecated_rest_port_is_the_listener_when_no_listeners_are_given():
    w = WorkerConfig.from_props({**DISTRIBUTED, "rest.port": "18999"}, standalone=False)
    assert w.rest_listen == ("127.0.0.1", 18999)


def test_unknown_keys_missing_required_and_bad_values_are_named():
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_props({"bootstrap.servers": "x:1", "offset.flush.intervall.ms": "5",
                                 "session.timeout.ms": "ten",
                                 "exactly.once.source.support": "maybe",
                                 "producer.linger.ms": "5", "consumer.max.poll.records": "9",
                                 "value.converter.schemas.enable": "false"},
                                standalone=False)
    errors = e.value.errors
    assert set(errors) == {"offset.flush.intervall.ms", "session.timeout.ms",
                           "exactly.once.source.support", "group.id", "config.storage.topic",
                           "offset.storage.topic", "status.storage.topic"}
    assert errors["group.id"] == [
        'Missing required configuration "group.id" which has no default value.']
    assert errors["session.timeout.ms"] == [
        "Invalid value ten for configuration session.timeout.ms: Not a number of type INT"]
    assert errors["exactly.once.source.support"] == [
        "Invalid value maybe for configuration exactly.once.source.support: "
        "String must be one of: disabled, preparing, enabled"]
    assert "offset.flush.intervall.ms" in str(e.value)


def test_standalone_needs_the_offsets_file_and_not_the_topics(tmp_path):
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_props({"bootstrap.servers": "x:1"}, standalone=True)
    assert set(e.value.errors) == {"offset.storage.file.filename"}
    with pytest.raises(ConfigError) as e:  # a distributed-only key
        WorkerConfig.from_props({"offset.storage.file.filename": "/tmp/o",
                                 "group.id": "g"}, standalone=True)
    assert set(e.value.errors) == {"group.id"}
    w = WorkerConfig.from_props({"offset.storage.file.filename": str(tmp_path / "o")},
                                standalone=True)
    assert w.standalone and w.get("offset.storage.file.filename") == str(tmp_path / "o")


def test_client_configs_per_role():
    w = WorkerConfig.from_props({
        **DISTRIBUTED, "bootstrap.servers": "a:1,b:2", "client.id": "w1",
        "producer.linger.ms": "7", "producer.client.id": "w1-producer",
        "consumer.max.poll.interval.ms": "90000", "admin.request.timeout.ms": "1000",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="alice" password="s3cret";'},
        standalone=False)
    security = {"security.protocol": "sasl_plaintext", "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice", "sasl.password": "s3cret"}
    assert w.client_config("producer") == {"bootstrap.servers": "a:1,b:2",
                                           "client.id": "w1-producer", "linger.ms": "7",
                                           **security}
    assert w.client_config("consumer") == {"bootstrap.servers": "a:1,b:2", "client.id": "w1",
                                           "max.poll.interval.ms": "90000", **security}
    assert w.internal_client_config() == {"bootstrap.servers": "a:1,b:2", "client.id": "w1",
                                          **security}
    assert w.security.sasl and w.security.username == "alice"
    tuned = WorkerConfig.from_props({**DISTRIBUTED, "retry.backoff.max.ms": "2000",
                                     "receive.buffer.bytes": "65536",
                                     "client.dns.lookup": "use_all_dns_ips"}, standalone=False)
    assert tuned.client_config("admin") == {  # librdkafka's names; no equivalent: left out
        "bootstrap.servers": "127.0.0.1:9092", "retry.backoff.max.ms": "2000",
        "socket.receive.buffer.bytes": "65536"}
    Producer(tuned.client_config("producer"))  # librdkafka knows every key
    Consumer({**tuned.client_config("consumer"), "group.id": "g"}).close()
    with pytest.raises(ValueError):
        w.client_config("streams")


def test_tls_keys_become_librdkafkas(tmp_path):
    w = WorkerConfig.from_props({
        **DISTRIBUTED, "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem", "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": "/etc/me.p12", "ssl.keystore.password": "pw",
        "ssl.endpoint.identification.algorithm": ""}, standalone=False)
    assert w.internal_client_config() == {
        "bootstrap.servers": "127.0.0.1:9092", "security.protocol": "ssl",
        "ssl.ca.location": "/etc/ca.pem", "ssl.keystore.location": "/etc/me.p12",
        "ssl.keystore.password": "pw", "ssl.endpoint.identification.algorithm": "none"}
    with pytest.raises(ConfigError, match="read PEM trust stores only"):
        WorkerConfig.from_props({**DISTRIBUTED, "security.protocol": "SSL",
                                 "ssl.truststore.type": "PKCS12",
                                 "ssl.truststore.location": "/etc/ca.p12"}, standalone=False)


def test_converter_config_strips_the_prefix():
    w = WorkerConfig.from_props({**DISTRIBUTED, "value.converter.schemas.enable": "false",
                                 "key.converter": "org.apache.kafka.connect.storage."
                                 "StringConverter"}, standalone=False)
    assert w.converter_config("value") == {"schemas.enable": "false"}
    assert w.converter_config("key") == {}
    assert w.get("key.converter") == "org.apache.kafka.connect.storage.StringConverter"


def test_a_bad_listener_and_an_unreadable_file_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="listeners"):
        WorkerConfig.from_props({**DISTRIBUTED, "listeners": "127.0.0.1:8083"},
                                standalone=False)
    with pytest.raises(ConfigError, match="cannot read worker config"):
        WorkerConfig.load(str(tmp_path / "missing.properties"), [], standalone=False)
    with pytest.raises(ConfigError, match="expected key=value"):
        WorkerConfig.load(None, ["group.id"], standalone=False)
