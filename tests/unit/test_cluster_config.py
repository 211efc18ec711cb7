"""ClusterConfig: roles, quorum and listeners checked together by Kafka's KRaft rules."""

from __future__ import annotations

import pytest

from spool.broker.config import BrokerConfig, ConfigError

COMBINED = (
    "process.roles=broker,controller",
    "node.id=1",
    "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097",
    "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names=CONTROLLER",
)
BROKER_ONLY = (
    "process.roles=broker",
    "node.id=4",
    "controller.quorum.voters=1@127.0.0.1:9093",
    "listeners=PLAINTEXT://127.0.0.1:9092",
    "controller.listener.names=CONTROLLER",
)


def load(*overrides: str) -> BrokerConfig:
    return BrokerConfig.load(None, list(overrides))


def error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as e:
        load(*overrides)
    return str(e.value)


def replace(base: tuple[str, ...], *changes: str) -> tuple[str, ...]:
    """``base`` with the keys of ``changes`` replaced (a change ``key=`` removes the key)."""
    keys = {c.split("=", 1)[0] for c in changes}
    return (*(b for b in base if b.split("=", 1)[0] not in keys),
            *(c for c in changes if not c.endswith("=")))


def test_a_single_node_has_no_roles_and_keeps_its_defaults():
    cc = load().cluster
    assert (cc.kraft, cc.is_broker, cc.is_controller) == (False, True, False)
    assert cc.node_id == 0 and cc.voters == {} and cc.controller_listener_names == []
    assert [(lst.name, lst.host, lst.port) for lst in cc.broker_listeners] == [
        ("PLAINTEXT", "127.0.0.1", 9092)]
    assert cc.metadata_log_dir == "./data"


def test_a_combined_node_parses_into_the_typed_view():
    cc = load(*COMBINED, "broker.rack=rack-a", "metadata.log.dir=/m").cluster
    assert (cc.kraft, cc.is_broker, cc.is_controller) == (True, True, True)
    assert cc.process_roles == {"broker", "controller"}
    assert cc.node_id == 1
    assert cc.voters == {1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9095), 3: ("127.0.0.1", 9097)}
    assert list(cc.voters) == [1, 2, 3]
    assert [lst.name for lst in cc.controller_listeners] == ["CONTROLLER"]
    assert [lst.name for lst in cc.broker_listeners] == ["PLAINTEXT"]
    assert [lst.name for lst in cc.advertised_broker_listeners] == ["PLAINTEXT"]
    assert [(lst.host, lst.port) for lst in cc.advertised_controller_listeners] == [
        ("127.0.0.1", 9093)]
    assert cc.listener("controller").protocol == "PLAINTEXT"  # Kafka's default mapping
    assert cc.is_controller_listener("CONTROLLER") and not cc.is_controller_listener("PLAINTEXT")
    assert cc.inter_broker_listener_name == "PLAINTEXT"
    assert (cc.rack, cc.metadata_log_dir) == ("rack-a", "/m")


def test_kafkas_defaults_for_the_quorum_and_the_broker_session():
    cc = load(*COMBINED).cluster
    assert (cc.broker_session_timeout_ms, cc.broker_heartbeat_interval_ms) == (9000, 2000)
    assert (cc.election_timeout_ms, cc.fetch_timeout_ms, cc.election_backoff_max_ms) == (
        1000, 2000, 1000)
    assert (cc.request_timeout_ms, cc.retry_backoff_ms, cc.append_linger_ms) == (2000, 20, 25)
    assert cc.metadata_max_idle_interval_ms == 500
    assert cc.metadata_snapshot_max_interval_ms == 3600000
    assert cc.metadata_snapshot_max_new_record_bytes == 20 * 1024 * 1024
    assert cc.initial_broker_registration_timeout_ms == 60000
    assert load().get("default.replication.factor") == "1"


def test_a_broker_only_node_may_bootstrap_from_servers_instead_of_voters():
    cc = load(*replace(BROKER_ONLY, "controller.quorum.voters=",
                       "controller.quorum.bootstrap.servers=127.0.0.1:9093,[::1]:9095")).cluster
    assert cc.voters == {} and cc.bootstrap_servers == [("127.0.0.1", 9093), ("::1", 9095)]


def test_advertised_listeners_default_to_listeners_and_may_differ():
    cc = load(*COMBINED, "advertised.listeners=PLAINTEXT://broker1.example:19092").cluster
    assert [(lst.host, lst.port) for lst in cc.advertised_broker_listeners] == [
        ("broker1.example", 19092)]
    # the controller listener, not advertised, is advertised as bound
    assert [(lst.host, lst.port) for lst in cc.advertised_controller_listeners] == [
        ("127.0.0.1", 9093)]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (replace(COMBINED, "node.id="),
         "Missing configuration `node.id` which is required when `process.roles` is defined "
         "(i.e. when running in KRaft mode)."),
        (replace(COMBINED, "process.roles=broker,broker"),
         "Duplicate role names found in `process.roles`: ['broker', 'broker']"),
        (replace(COMBINED, "process.roles=broker,zookeeper"),
         "process.roles=broker,zookeeper: expected a comma-separated list of broker, controller "
         "(or nothing)"),
        (replace(COMBINED, "controller.quorum.voters="),
         "If using process.roles, either controller.quorum.bootstrap.servers must contain the "
         "set of bootstrap controllers or controller.quorum.voters must contain a parseable set "
         "of controllers."),
        (replace(COMBINED, "controller.quorum.voters=2@127.0.0.1:9095,3@127.0.0.1:9097"),
         "If process.roles contains the 'controller' role, the node id 1 must be included in "
         "the set of voters controller.quorum.voters=Set(2, 3)"),
        (replace(BROKER_ONLY, "node.id=1"),
         "If process.roles contains just the 'broker' role, the node id 1 must not be included "
         "in the set of voters controller.quorum.voters=Set(1)"),
        (replace(COMBINED, "controller.listener.names=",
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"),
         "controller.listener.names must contain at least one value appearing in the "
         "'listeners' configuration when running the KRaft controller role"),
        (replace(COMBINED, "controller.listener.names=CONTROLLER,OTHER"),
         "controller.listener.names must only contain values appearing in the 'listeners' "
         "configuration when running the KRaft controller role"),
        (replace(COMBINED, "process.roles=controller"),
         "The listeners config must only contain KRaft controller listeners from "
         "controller.listener.names when process.roles=controller"),
        (replace(BROKER_ONLY, "controller.listener.names="),
         "controller.listener.names must contain at least one value when running KRaft with "
         "just the broker role"),
        (replace(BROKER_ONLY, "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"),
         "controller.listener.names must not contain a value appearing in the 'listeners' "
         "configuration when running KRaft with just the broker role"),
        (replace(BROKER_ONLY, "listener.security.protocol.map=PLAINTEXT:PLAINTEXT"),
         "Controller listener with name CONTROLLER defined in controller.listener.names not "
         "found in listener.security.protocol.map  (an explicit security mapping for each "
         "controller listener is required if listener.security.protocol.map is non-empty, or "
         "if there are security protocols other than PLAINTEXT in use)"),
        (replace(BROKER_ONLY,
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"),
         "listener CONTROLLER as a client (SASL_SSL): sasl.mechanism=GSSAPI: expected one of "
         "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (GSSAPI, Kafka's default, is not "
         "supported: set sasl.mechanism)"),
        (replace(COMBINED, "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"),
         "listener CONTROLLER://127.0.0.1:9093: no keystore: set ssl.keystore.location (PEM or "
         "PKCS12), or ssl.keystore.certificate.chain and ssl.keystore.key (PEM)"),
        ((*COMBINED, "inter.broker.listener.name=CONTROLLER"),
         "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
         "The valid options based on currently configured listeners are PLAINTEXT"),
        ((*COMBINED, "inter.broker.listener.name=REPLICATION"),
         "Listener with name REPLICATION defined in inter.broker.listener.name not found in "
         "listener.security.protocol.map."),
        (replace(COMBINED, "listeners=INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                 "listener.security.protocol.map=INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                 "PLAINTEXT:PLAINTEXT"),
         "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
         "The valid options based on currently configured listeners are INTERNAL"),
        (replace(COMBINED, "listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://127.0.0.1:9093"),
         "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable "
         "IP address."),
        (replace(COMBINED, "controller.quorum.voters=1@127.0.0.1"),
         "Failed to parse host name from entry 1@127.0.0.1 for the configuration "
         "controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."),
        (replace(COMBINED, "controller.quorum.voters=127.0.0.1:9093"),
         "Invalid configuration value for controller.quorum.voters. Each entry should be in "
         "the form `{id}@{host}:{port}`."),
        (replace(COMBINED, "controller.quorum.voters=one@127.0.0.1:9093"),
         "Failed to parse voter ID as an integer from one"),
        (replace(COMBINED, "controller.quorum.voters=1@0.0.0.0:9093"),
         "Host string (0.0.0.0) is not routeable"),
        (replace(COMBINED, "controller.quorum.voters=1@127.0.0.1:9093,1@127.0.0.1:9095"),
         "controller.quorum.voters names voter 1 twice"),
        (replace(BROKER_ONLY, "controller.quorum.voters=",
                 "controller.quorum.bootstrap.servers=127.0.0.1"),
         'Failed to parse host name from 127.0.0.1 for the configuration '
         'controller.quorum.bootstrap.servers. Each entry should be in the form '
         '"{host}:{port}"'),
        (replace(COMBINED, "controller.quorum.voters=",
                 "controller.quorum.bootstrap.servers=127.0.0.1:9093"),
         "a controller needs controller.quorum.voters: a dynamic quorum "
         "(controller.quorum.bootstrap.servers alone, KIP-853) is not supported yet"),
        (("controller.quorum.voters=1@127.0.0.1:9093",),
         "controller.quorum.voters is set but process.roles is not: set process.roles (broker, "
         "controller or broker,controller) to join a quorum, or remove controller.quorum.voters "
         "to run a single node"),
        (("controller.listener.names=CONTROLLER",),
         "controller.listener.names must be empty when not running in KRaft mode: "
         "['CONTROLLER']"),
        (("broker.session.timeout.ms=0",), "broker.session.timeout.ms=0: expected an integer >= 1"),
    ],
)
def test_refused_with_kafkas_message(overrides, message):
    assert error(*overrides) == message


def test_a_single_node_keeps_any_plaintext_listener_name():
    """Kafka would want inter.broker.listener.name (PLAINTEXT) among the listeners; the
    single node never needed that, and still does not unless the key is set."""
    cc = load("listeners=EXTERNAL://127.0.0.1:9092",
              "listener.security.protocol.map=EXTERNAL:PLAINTEXT").cluster
    assert [lst.name for lst in cc.advertised_broker_listeners] == ["EXTERNAL"]
    assert error("listeners=EXTERNAL://127.0.0.1:9092",
                 "listener.security.protocol.map=EXTERNAL:PLAINTEXT",
                 "inter.broker.listener.name=PLAINTEXT") == (
        "Listener with name PLAINTEXT defined in inter.broker.listener.name not found in "
        "listener.security.protocol.map.")
