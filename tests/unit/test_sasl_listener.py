"""What a SASL listener serves, from Kafka's keys; mistakes refused when the config loads."""

from __future__ import annotations

import pytest

from spool.broker.config import BrokerConfig, ConfigError
from spool.broker.sasl_listener import sasl_listeners

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="a";')


def load(*overrides: str) -> BrokerConfig:
    return BrokerConfig.load(None, ["listeners=SASL_PLAINTEXT://127.0.0.1:0", *overrides])


def test_listener_prefixed_keys_win():
    cfg = load("sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
               f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
               "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms=5000",
               "connections.max.reauth.ms=9000",
               "listener.name.sasl_plaintext.sasl.server.max.receive.size=1000")
    lst = sasl_listeners(cfg)["SASL_PLAINTEXT"]
    assert lst.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert lst.reauth_ms == {"PLAIN": 9000, "SCRAM-SHA-512": 5000}
    assert lst.max_receive_size == 1000 and lst.failed_delay_ms == 100


@pytest.mark.parametrize(("overrides", "message"), [
    (("sasl.enabled.mechanisms=PLAIN",),
     'listener SASL_PLAINTEXT enables SASL mechanism PLAIN but '
     'listener.name.sasl_plaintext.plain.sasl.jaas.config does not name '
     'org.apache.kafka.common.security.plain.PlainLoginModule with its users '
     '(user_<name>="<password>")'),
    (("sasl.enabled.mechanisms=PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config=x.PlainLoginModule required a=1"),
     "listener.name.sasl_plaintext.plain.sasl.jaas.config: login module x.PlainLoginModule: "
     "missing ';' at the end"),
    (("sasl.enabled.mechanisms=OAUTHBEARER",
      "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=a.B"),
     "listener SASL_PLAINTEXT (OAUTHBEARER): sasl.server.callback.handler.class=a.B is not one "
     "Spool has (unset: unsecured JWS tokens; or org.apache.kafka.common.security.oauthbearer."
     "OAuthBearerValidatorCallbackHandler)"),
    (("sasl.enabled.mechanisms=OAUTHBEARER",
      "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class="
      "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"),
     "listener SASL_PLAINTEXT (OAUTHBEARER): org.apache.kafka.common.security.oauthbearer."
     "OAuthBearerValidatorCallbackHandler needs sasl.oauthbearer.jwks.endpoint.url "
     "(file:///path)"),
    (("sasl.enabled.mechanisms=OAUTHBEARER",
      "sasl.server.callback.handler.class="
      "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
      "sasl.oauthbearer.jwks.endpoint.url=file:///nonexistent/jwks.json"),
     "listener SASL_PLAINTEXT (OAUTHBEARER): cannot read the JWKS file /nonexistent/jwks.json: "
     "No such file or directory"),
])
def test_mistakes_are_refused_naming_the_listener_and_key(overrides, message):
    with pytest.raises(ConfigError) as e:
        load(*overrides)
    assert str(e.value) == message
