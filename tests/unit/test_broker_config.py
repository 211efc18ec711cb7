"""BrokerConfig: Kafka's server.properties keys checked before the broker starts."""

from __future__ import annotations

import pytest

from spool.broker.config import (
    BROKER_KEYS,
    BrokerConfig,
    ConfigError,
    known_key,
)


def load(*overrides: str, path=None) -> BrokerConfig:
    return BrokerConfig.load(path, list(overrides))


def error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as e:
        load(*overrides)
    return str(e.value)


def test_every_key_has_a_type_a_default_of_that_type_and_a_doc():
    for name, key in BROKER_KEYS.items():
        assert key.name == name and key.doc, name
        if key.default is not None and key.check is not None:
            assert key.check.ok(key.default), name


def test_listener_names_map_to_protocols():
    cfg = load("listeners=EXTERNAL://:9093,PLAINTEXT://127.0.0.1:9092",
               "listener.security.protocol.map=external:plaintext,PLAINTEXT:PLAINTEXT")
    assert [(lst.name, lst.host, lst.port, lst.protocol) for lst in cfg.listeners] == [
        ("EXTERNAL", "0.0.0.0", 9093, "PLAINTEXT"), ("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("listeners=SASL_SSL://h:1",),
         "listener SASL_SSL://h:1: no keystore: set ssl.keystore.location (PEM or PKCS12), or "
         "ssl.keystore.certificate.chain and ssl.keystore.key (PEM)"),
        (("listeners=PLAINTEXT://h:1,PLAINTEXT://h:2",),
         "listeners: listener name PLAINTEXT is used twice; each needs its own"),
        (("listeners=PLAINTEXT://h:1", "advertised.listeners=OTHER://h:1",
          "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"),
         "advertised.listeners: listener OTHER://h:1 has a name (OTHER) that listeners does not "
         "define"),
        (("listeners=PLAINTEXT://h:99999",), "listeners: listener 'PLAINTEXT://h:99999' has a bad port (0-65535)"),
        (("listeners=PLAINTEXT://h",), "listeners: listener 'PLAINTEXT://h' has no port"),
        (("listeners=h:1",), "listeners: listener 'h:1' is not NAME://host:port"),
        (("listener.security.protocol.map=PLAINTEXT:TLS",),
         "listener.security.protocol.map=PLAINTEXT:TLS: TLS is not a security protocol (expected "
         "one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"),
        (("listener.security.protocol.map=PLAINTEXT",),
         "listener.security.protocol.map=PLAINTEXT: 'PLAINTEXT' is not NAME:PROTOCOL"),
        (("node.id=1", "broker.id=2"), "node.id=1 and broker.id=2 differ; set one of them"),
        (("node.id=-1",), "node.id=-1: expected an integer >= 0"),
        (("log.dirs=/a,/a",),
         "log.dirs=/a,/a: expected a non-empty comma-separated list of paths without duplicates"),
        (("offsets.topic.replication.factor=40000",),
         "offsets.topic.replication.factor=40000: expected an integer >= 1 and at most 32767"),
        (("log.cleaner.min.cleanable.ratio=2",),
         "log.cleaner.min.cleanable.ratio=2: expected a number between 0 and 1"),
        (("group.consumer.assignors=uniform,sticky",),
         "group.consumer.assignors=uniform,sticky: expected a non-empty list of uniform, range "
         "(or Kafka's class names of them)"),
        (("group.consumer.assignors=",),
         "group.consumer.assignors=: expected a non-empty list of uniform, range "
         "(or Kafka's class names of them)"),
        (("replica.selector.class=com.example.Nearest",),
         "replica.selector.class=com.example.Nearest: expected empty or "
         "org.apache.kafka.common.replica.RackAwareReplicaSelector (the replica selectors "
         "Spool has)"),
        (("authorizer.class.name=kafka.security.authorizer.AclAuthorizer",),
         "authorizer.class.name=kafka.security.authorizer.AclAuthorizer: expected empty (no "
         "authorizer) or org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
         "spool.security.authorizer.StandardAuthorizer"),
        (("super.users=alice",),
         "super.users=alice: expected principals as Type:name separated by ';'"),
        (("oops",), "override 'oops' is not key=value"),
    ],
)
def test_refused(overrides, message):
    assert error(*overrides) == message


def test_consumer_assignors_by_name_or_kafkas_class_name():
    uniform = "org.apache.kafka.coordinator.group.assignor.UniformAssignor"
    from spool.broker.group_runtime import assignor_names

    value = load(f"group.consumer.assignors=range,{uniform}").get("group.consumer.assignors")
    assert assignor_names(value) == ("range", "uniform")


def test_the_replica_selector_is_kafkas_rack_aware_one_or_none():
    rack_aware = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert load(f"replica.selector.class={rack_aware}").get("replica.selector.class") == rack_aware
    assert not load().get("replica.selector.class")


def test_unknown_keys_are_kept_out_and_listed_with_hints(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("num.partitons=6\nlog.retention.hours=2\n")
    cfg = load("log.dirz=/x", "zzz=1", path=props)
    assert cfg.unknown == ["num.partitons", "log.dirz", "zzz"]
    assert cfg.get_int("num.partitions") == 1 and "log.dirz" not in cfg.values
    assert cfg.unknown_warnings() == [
        "The configuration 'num.partitons' was supplied but isn't a known config; it is ignored "
        "(did you mean 'num.partitions'?)",
        "The configuration 'log.dirz' was supplied but isn't a known config; it is ignored "
        "(did you mean 'log.dir' or 'log.dirs'?)",
        "The configuration 'zzz' was supplied but isn't a known config; it is ignored",
    ]
    assert cfg.log_defaults() == {"log.retention.hours": "2"}


def test_the_storage_layer_gets_only_keys_it_knows():
    cfg = load("num.partitions=3", "log.segment.bytes=2097152", "cluster.id=abc")
    assert cfg.log_defaults() == {"num.partitions": "3", "log.segment.bytes": "2097152"}
    assert known_key("log.segment.bytes") is not None and known_key("segment.bytes") is None


def test_a_config_file_that_cannot_be_read(tmp_path):
    with pytest.raises(ConfigError) as e:
        load(path=tmp_path)
    assert str(e.value) == f"cannot read config file {tmp_path}: Is a directory"
    bad = tmp_path / "bin.properties"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError) as e:
        load(path=bad)
    assert str(e.value) == f"config file {bad} is not UTF-8 text"


def test_listener_prefixed_keys_are_read_in_kafkas_order():
    cfg = load("ssl.keystore.location=/all.p12",
               "listener.name.internal.ssl.keystore.location=/internal.p12",
               "sasl.jaas.config=base",
               "listener.name.sasl_ssl.sasl.jaas.config=listener",
               "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=scram")
    assert cfg.listener_value("INTERNAL", "ssl.keystore.location") == "/internal.p12"
    assert cfg.listener_value("EXTERNAL", "ssl.keystore.location") == "/all.p12"
    assert cfg.listener_value("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256") == "scram"
    assert cfg.listener_value("SASL_SSL", "sasl.jaas.config", "PLAIN") == "listener"
    assert cfg.listener_value("SASL_SSL", "sasl.jaas.config") == "listener"
    assert cfg.listener_value("OTHER", "sasl.jaas.config", "PLAIN") == "base"
    assert cfg.listener_value("OTHER", "ssl.client.auth") == "none"  # the default
    assert cfg.listener_value("OTHER", "ssl.keystore.key") is None
    assert cfg.unknown == []


def test_listener_prefixed_keys_are_checked_as_their_base_key():
    assert error("listener.name.ssl.ssl.client.auth=always") == (
        "listener.name.ssl.ssl.client.auth=always: expected one of required, requested, none")
    cfg = load("listener.name.ssl.ssl.no.such.key=1", "listener.name.ssl.plain.sasl.nope=x")
    assert cfg.unknown == ["listener.name.ssl.ssl.no.such.key", "listener.name.ssl.plain.sasl.nope"]
    assert "listener names are lowercase" in error("listener.name.SSL.ssl.client.auth=required")


def test_server_properties_are_read_as_java_reads_them(tmp_path):
    """One properties reader (spool.util.properties): Java's separators, continuations
    and escapes; values trimmed as Kafka's ConfigDef trims them."""
    path = tmp_path / "server.properties"
    path.write_text("# a comment\nnum.partitions 3\nlog.retention.ms : 1000   \n"
                    "log.dirs=/tmp/a,\\\n    /tmp/b\n", encoding="utf-8")
    values = load(path=path).values
    assert (values["num.partitions"], values["log.retention.ms"], values["log.dirs"]) == (
        "3", "1000", "/tmp/a,/tmp/b")
