"""What a SASL listener serves: its mechanisms and how each checks a client.

``sasl_listeners(config, scram_credential)`` reads, for every listener whose security
protocol is ``SASL_PLAINTEXT`` or ``SASL_SSL``, Kafka's keys through
``BrokerConfig.listener_value`` (``listener.name.<l>.[<mechanism>.]<key>``, then
``<key>``):

- ``sasl.enabled.mechanisms``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (Kafka's
  default, GSSAPI, is refused at startup: Spool has no Kerberos);
- PLAIN's users: ``listener.name.<l>.plain.sasl.jaas.config``'s PlainLoginModule
  ``user_<name>="<password>"`` options (required when PLAIN is enabled);
- SCRAM's credentials: ``scram_credential(user, ScramMechanism)`` (the broker's
  security image: AlterUserScramCredentials, ``spool storage format --add-scram``);
- OAUTHBEARER: ``spool.security.sasl.oauthbearer`` (unsecured JWS, or JWTs checked
  against a JWKS file when ``sasl.server.callback.handler.class`` names Kafka's
  OAuthBearerValidatorCallbackHandler);
- ``sasl.server.max.receive.size``, ``connections.max.reauth.ms`` (per mechanism) and
  ``connection.failed.authentication.delay.ms``.

A mistake is a ``ConfigError`` naming the listener and key, raised when the broker's
configuration is loaded, before anything listens. The per-listener keys Kafka updates
dynamically (``listener.name.<l>.plain.sasl.jaas.config``, ``sasl.enabled.mechanisms``,
``listener.name.<l>.<mechanism>.connections.max.reauth.ms``...) are checked the same
way when AlterConfigs sets them (INVALID_REQUEST) and serve new connections
(``spool.broker.dynamic_config``; authenticated connections keep their session).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spool.broker.config import BrokerConfig, ConfigError
from spool.security import jaas
from spool.security.sasl import MECHANISMS, OAUTHBEARER, PLAIN, SaslServer
from spool.security.sasl.oauthbearer import JwksValidator, OAuthBearerServer, UnsecuredValidator
from spool.security.sasl.plain import PlainServer
from spool.security.sasl.scram import ScramServer
from spool.security.scram import ScramCredential, ScramMechanism

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
SASL_KEYS = frozenset({
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.server.max.receive.size",
    "connections.max.reauth.ms", "sasl.server.callback.handler.class",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.clock.skew.seconds"})

ScramLookup = Callable[[str, ScramMechanism], ScramCredential | None]


def _no_scram(user: str, mech: ScramMechanism) -> ScramCredential | None:
    return None


@dataclass
class SaslListener:
    name: str
    mechanisms: tuple[str, ...]
    max_receive_size: int
    reauth_ms: dict[str, int]  # mechanism -> connections.max.reauth.ms (0: none)
    factories: dict[str, Callable[[], SaslServer]] = field(default_factory=dict)
    failed_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    unsecured_oauthbearer: bool = False  # OAUTHBEARER takes unsigned tokens (development)

    def server(self, mechanism: str) -> SaslServer:
        return self.factories[mechanism]()


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> jaas.LoginModule | None:
    text = config.listener_value(listener, "sasl.jaas.config", mechanism)
    if not text:
        return None
    try:
        return jaas.parse_jaas_config(text)
    except jaas.JaasConfigError as e:
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        raise ConfigError(f"{key}: {e}") from None


def _plain(config: BrokerConfig, listener: str) -> Callable[[], SaslServer]:
    key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
    module = _jaas(config, listener, PLAIN)
    if module is None or module.simple_name != "PlainLoginModule":
        raise ConfigError(
            f"listener {listener} enables SASL mechanism PLAIN but {key} does not name "
            f"{jaas.PLAIN_LOGIN_MODULE} with its users (user_<name>=\"<password>\")")
    users = jaas.plain_users(module)
    return lambda: PlainServer(users)


VALIDATED_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)


def _oauthbearer(config: BrokerConfig, listener: str) -> Callable[[], SaslServer]:
    """Unsecured JWS tokens, or JWTs against a JWKS file when the listener's
    ``sasl.server.callback.handler.class`` is Kafka's OAuthBearerValidatorCallbackHandler."""
    handler = config.listener_value(listener, "sasl.server.callback.handler.class", OAUTHBEARER)
    module = _jaas(config, listener, OAUTHBEARER)
    prefix = f"listener {listener} (OAUTHBEARER)"
    try:
        if handler in VALIDATED_HANDLERS:
            url = config.listener_value(listener, "sasl.oauthbearer.jwks.endpoint.url")
            if not url:
                raise ConfigError(f"{prefix}: {handler} needs "
                                  f"sasl.oauthbearer.jwks.endpoint.url (file:///path)")
            audience = [a.strip() for a in (config.listener_value(
                listener, "sasl.oauthbearer.expected.audience") or "").split(",") if a.strip()]
            validator = JwksValidator(
                url, audience=audience,
                issuer=config.listener_value(listener, "sasl.oauthbearer.expected.issuer"),
                sub_claim=config.listener_value(listener, "sasl.oauthbearer.sub.claim.name")
                or "sub",
                clock_skew_s=int(config.listener_value(
                    listener, "sasl.oauthbearer.clock.skew.seconds") or 30))
        elif handler:
            raise ConfigError(f"{prefix}: sasl.server.callback.handler.class={handler} is not "
                              f"one Spool has (unset: unsecured JWS tokens; or "
                              f"{VALIDATED_HANDLERS[0]})")
        else:
            validator = UnsecuredValidator(module.options if module is not None else {})
    except ValueError as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{prefix}: {e}") from None
    return lambda: OAuthBearerServer(validator)


def _scram_factory(mech: ScramMechanism, lookup: ScramLookup) -> Callable[[], SaslServer]:
    return lambda: ScramServer(mech, lookup)


def sasl_listener(config: BrokerConfig, name: str,
                  scram_credential: ScramLookup = _no_scram) -> SaslListener:
    mechanisms = tuple(m.strip() for m in
                       (config.listener_value(name, "sasl.enabled.mechanisms") or "").split(",")
                       if m.strip())
    if not mechanisms:
        raise ConfigError(f"listener {name}: sasl.enabled.mechanisms is empty")
    for m in mechanisms:
        if m not in MECHANISMS:
            raise ConfigError(
                f"listener {name}: sasl.enabled.mechanisms={','.join(mechanisms)}: {m} is not "
                f"supported (Spool serves {', '.join(MECHANISMS)}; GSSAPI, Kafka's default, "
                f"needs Kerberos, which Spool does not have)")
    out = SaslListener(
        name, mechanisms,
        max_receive_size=int(config.listener_value(name, "sasl.server.max.receive.size")
                             or 524288),
        reauth_ms={m: int(config.listener_value(name, "connections.max.reauth.ms", m) or 0)
                   for m in mechanisms},
        failed_delay_ms=int(config.get("connection.failed.authentication.delay.ms") or 0))
    for m in mechanisms:
        scram = ScramMechanism.from_name(m)
        if m == PLAIN:
            out.factories[m] = _plain(config, name)
        elif scram is not None:
            out.factories[m] = _scram_factory(scram, scram_credential)
        elif m == OAUTHBEARER:
            out.factories[m] = _oauthbearer(config, name)
            out.unsecured_oauthbearer = not config.listener_value(
                name, "sasl.server.callback.handler.class", OAUTHBEARER)
        else:
            raise ConfigError(f"listener {name}: SASL mechanism {m} is not served yet")
    return out


class _WithDynamic:
    """A ``BrokerConfig`` as the broker sees it with its dynamic configs over it."""

    def __init__(self, config: BrokerConfig, dynamic: Mapping[str, str]) -> None:
        self.config, self.dynamic = config, dynamic

    def listener_value(self, listener: str, key: str, mechanism: str | None = None):
        return self.config.listener_value(listener, key, mechanism, dynamic=self.dynamic)

    def get(self, key: str) -> str | None:
        value = self.dynamic.get(key)
        return value if value is not None else self.config.get(key)


def sasl_listeners(config: BrokerConfig, scram_credential: ScramLookup = _no_scram,
                   dynamic: Mapping[str, str] | None = None) -> dict[str, SaslListener]:
    """Every SASL listener's ``SaslListener``, by listener name; with ``dynamic`` (the
    broker's dynamic configs, both layers merged) read over the static ones."""
    view: Any = _WithDynamic(config, dynamic) if dynamic else config
    return {lst.name: sasl_listener(view, lst.name, scram_credential)
            for lst in config.listeners if lst.protocol in SASL_PROTOCOLS}


def is_sasl_key(name: str) -> bool:
    """A key (listener-prefixed or not) a SASL listener is built from."""
    if name in SASL_KEYS:
        return True
    return name.startswith("listener.name.") and any(name.endswith("." + k)
                                                     for k in SASL_KEYS)
