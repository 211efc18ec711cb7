"""How this node's own connections to other nodes are secured, as Kafka's broker does it.

A broker's clients of other nodes (the replica fetcher, transaction markers and
verification, a broker's channel to the controller, Raft between controllers,
forwarding) authenticate like any client, with the settings of the listener they
connect to, taken from the broker's own config (Kafka's
``ChannelBuilders.clientChannelBuilder`` with the listener's prefixed configs and
``JaasContext.loadServerContext``):

- Broker to broker: the listener ``inter.broker.listener.name`` (or the one named
  after ``security.inter.broker.protocol``; setting both is Kafka's error), its
  security protocol from ``listener.security.protocol.map``, the mechanism
  ``sasl.mechanism.inter.broker.protocol``.
- To a controller (a broker's registration, heartbeats and forwarded requests;
  controllers' Raft traffic): the first of ``controller.listener.names``, the
  mechanism ``sasl.mechanism.controller.protocol``.
- Credentials: the ``username`` and ``password`` options of that listener's
  ``sasl.jaas.config`` for the mechanism (``listener.name.<l>.<mechanism>.sasl.jaas.config``,
  then ``listener.name.<l>.sasl.jaas.config``, then ``sasl.jaas.config``: the same JAAS
  section that lists the listener's PLAIN users; SCRAM's is
  ``ScramLoginModule required username="admin" password="...";``).
- TLS: that listener's ``ssl.truststore.*`` (the peers' CA), ``ssl.keystore.*`` (this
  broker's certificate, presented when the peer asks for one: mTLS),
  ``ssl.endpoint.identification.algorithm`` (``https`` by default: the peer's certificate
  must name the host it is reached at), ``ssl.enabled.protocols``, ``ssl.cipher.suites``.

``check(config)`` refuses at startup what Kafka refuses (a SASL inter-broker mechanism
the listener does not enable, missing credentials) so a broker never starts unable to
replicate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spool.security.client_config import ClientConfigError, ClientSecurity

if TYPE_CHECKING:
    from spool.broker.config import BrokerConfig

_SSL_KEYS = (
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.endpoint.identification.algorithm", "ssl.enabled.protocols", "ssl.cipher.suites",
)


def listener_client_security(config: BrokerConfig, listener: str,
                             mechanism: str) -> ClientSecurity:
    """How this node connects, as a client, to ``listener`` of another node (module doc).
    ClientConfigError (a ValueError) names the key when the settings cannot work."""
    protocol = config.protocol_map.get(listener.upper(), "PLAINTEXT")
    props: dict[str, str] = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        for key in _SSL_KEYS:
            v = config.listener_value(listener, key)
            if v is not None and v != "":
                props[key] = v
            elif key == "ssl.endpoint.identification.algorithm" and v == "":
                props[key] = ""
        for store in ("truststore", "keystore"):
            if f"ssl.{store}.location" in props:  # (the type's JKS default matters only then)
                props[f"ssl.{store}.type"] = config.listener_value(listener,
                                                                   f"ssl.{store}.type") or "PEM"
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        props["sasl.mechanism"] = mechanism
        jaas = config.listener_value(listener, "sasl.jaas.config", mechanism=mechanism)
        if jaas:
            props["sasl.jaas.config"] = jaas
    try:
        return ClientSecurity.from_properties(props)
    except ClientConfigError as e:
        raise ClientConfigError(f"listener {listener.upper()} as a client "
                                f"({protocol}): {e}") from None


def inter_broker_listener(config: BrokerConfig) -> str:
    """``inter.broker.listener.name``, else ``security.inter.broker.protocol``'s name,
    else PLAINTEXT (Kafka's getInterBrokerListenerNameAndSecurityProtocol)."""
    name = config.values.get("inter.broker.listener.name")
    proto = config.values.get("security.inter.broker.protocol")
    if name and proto:
        raise ClientConfigError("Only one of inter.broker.listener.name and "
                                "security.inter.broker.protocol should be set.")
    return (name or proto or "PLAINTEXT").strip().upper()


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """Broker to broker (module doc)."""
    mech = config.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI"
    return listener_client_security(config, inter_broker_listener(config), mech)


def controller_security(config: BrokerConfig) -> ClientSecurity:
    """To the controllers (module doc); PLAINTEXT on a single node (no controller listener)."""
    names = [n.strip() for n in (config.get("controller.listener.names") or "").split(",")
             if n.strip()]
    if not names:
        return ClientSecurity()
    mech = config.get("sasl.mechanism.controller.protocol") or "GSSAPI"
    return listener_client_security(config, names[0], mech)


def check(config: BrokerConfig) -> None:
    """Kafka's startup rules for this node's client side; ClientConfigError."""
    roles = config.get_list("process.roles")
    if not roles or "broker" in roles:
        sec = inter_broker_security(config)
        name = inter_broker_listener(config)
        if sec.sasl and sec.sasl_mechanism not in _enabled(config, name):
            raise ClientConfigError(
                "sasl.mechanism.inter.broker.protocol must be included in "
                "sasl.enabled.mechanisms when SASL is used for inter-broker communication")
    if roles:
        sec = controller_security(config)
        names = [n.strip() for n in (config.get("controller.listener.names") or "").split(",")
                 if n.strip()]
        if sec.sasl and "controller" in roles and sec.sasl_mechanism not in _enabled(
                config, names[0]):
            raise ClientConfigError(
                "sasl.mechanism.controller.protocol must be included in "
                "sasl.enabled.mechanisms when SASL is used for the controller listener")


def _enabled(config: BrokerConfig, listener: str) -> list[str]:
    v = config.listener_value(listener, "sasl.enabled.mechanisms") or ""
    return [m.strip() for m in v.split(",") if m.strip()]
