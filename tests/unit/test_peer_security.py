"""spool.broker.peer_security: a node's own connections take the listener's settings, as Kafka."""

from __future__ import annotations

import pytest

from spool.broker import peer_security
from spool.broker.config import BrokerConfig
from spool.security.client_config import ClientConfigError

SCRAM_ADMIN = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
               'username="admin" password="admin-secret";')
PLAIN_ADMIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="broker" password="broker-secret" user_broker="broker-secret" '
               'user_alice="alice-secret";')


def config(**values: str) -> BrokerConfig:
    """Unvalidated (the listeners' protocols are tls' and sasl's to accept)."""
    cfg = BrokerConfig()
    cfg.update({
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
        "listeners": "INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,"
                     "EXTERNAL://127.0.0.1:9094",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,CONTROLLER:SSL,"
                                          "EXTERNAL:SASL_PLAINTEXT"} | values)
    return cfg


def test_inter_broker_takes_the_listeners_mechanism_jaas_and_trust():
    cfg = config(**{
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_ADMIN,
        "listener.name.internal.plain.sasl.jaas.config": PLAIN_ADMIN,
        "listener.name.internal.ssl.truststore.location": "/certs/ca.pem",
        "listener.name.internal.ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/certs/other-ca.pem",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/certs/broker1.pem"})
    sec = peer_security.inter_broker_security(cfg)
    assert (sec.protocol, sec.sasl_mechanism, sec.username, sec.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "admin", "admin-secret")
    assert (sec.truststore_type, sec.truststore_location) == ("PEM", "/certs/ca.pem")
    assert (sec.keystore_type, sec.keystore_location) == ("PEM", "/certs/broker1.pem")
    assert sec.endpoint_identification == "https"  # Kafka's default for brokers too


def test_the_controller_channel_takes_the_first_controller_listener():
    cfg = config(**{"listener.name.controller.ssl.endpoint.identification.algorithm": "",
                    "listener.name.controller.ssl.truststore.certificates": "-----BEGIN X"})
    sec = peer_security.controller_security(cfg)
    assert (sec.protocol, sec.sasl, sec.endpoint_identification) == ("SSL", False, "")
    assert sec.truststore_certificates == "-----BEGIN X"


def test_security_inter_broker_protocol_names_the_listener():
    cfg = config(**{"security.inter.broker.protocol": "SASL_PLAINTEXT",
                    "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                                      "CONTROLLER:SSL",
                    "sasl.mechanism.inter.broker.protocol": "PLAIN",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_ADMIN})
    sec = peer_security.inter_broker_security(cfg)
    assert (sec.protocol, sec.username, sec.password) == (
        "SASL_PLAINTEXT", "broker", "broker-secret")
    both = config(**{"security.inter.broker.protocol": "SASL_SSL",
                     "inter.broker.listener.name": "INTERNAL"})
    with pytest.raises(ClientConfigError, match="Only one of inter.broker.listener.name and "
                                                "security.inter.broker.protocol should be set."):
        peer_security.inter_broker_security(both)


def test_kafkas_startup_refusals():
    not_enabled = config(**{
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_ADMIN})
    with pytest.raises(ClientConfigError, match="sasl.mechanism.inter.broker.protocol must be "
                                                "included in sasl.enabled.mechanisms"):
        peer_security.check(not_enabled)
    no_credentials = config(**{
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'})
    with pytest.raises(ClientConfigError, match='listener INTERNAL as a client \\(SASL_SSL\\): '
                                                'sasl.jaas.config: PLAIN needs username='):
        peer_security.check(no_credentials)
    gssapi = config(**{"inter.broker.listener.name": "INTERNAL"})  # Kafka's default mechanism
    with pytest.raises(ClientConfigError, match="GSSAPI, Kafka's default, is not supported"):
        peer_security.check(gssapi)


def test_a_broker_only_node_needs_credentials_for_a_sasl_controller_listener():
    cfg = config(**{"process.roles": "broker", "node.id": "4",
                    "listeners": "INTERNAL://127.0.0.1:9092",
                    "listener.security.protocol.map": "INTERNAL:SSL,CONTROLLER:SASL_SSL",
                    "inter.broker.listener.name": "INTERNAL",
                    "sasl.mechanism.controller.protocol": "SCRAM-SHA-256"})
    with pytest.raises(ClientConfigError, match='listener CONTROLLER as a client \\(SASL_SSL\\): '
                                                'sasl.jaas.config: SCRAM-SHA-256 needs username='):
        peer_security.check(cfg)
    cfg.update({"listener.name.controller.scram-sha-256.sasl.jaas.config": SCRAM_ADMIN.replace(
        "admin-secret", "s")})
    peer_security.check(cfg)  # (the controllers' sasl.enabled.mechanisms are theirs to check)
    sec = peer_security.controller_security(cfg)
    assert (sec.protocol, sec.sasl_mechanism, sec.username, sec.password) == (
        "SASL_SSL", "SCRAM-SHA-256", "admin", "s")
