"""JAAS config text, as Kafka's sasl.jaas.config property holds it."""

import pytest

from spool.security.jaas import JaasConfigError, parse_jaas_config, plain_users


def test_plain_login_module_with_users():
    m = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" user_alice="a \\"quoted\\" pw";')
    assert m.simple_name == "PlainLoginModule" and m.flag == "required"
    assert m.options["username"] == "admin"
    assert plain_users(m) == {"admin": "admin-secret", "alice": 'a "quoted" pw'}


def test_unquoted_values_and_other_flags():
    m = parse_jaas_config("x.OAuthBearerLoginModule optional unsecuredLoginStringClaim_sub=me;")
    assert (m.flag, m.options) == ("optional", {"unsecuredLoginStringClaim_sub": "me"})


@pytest.mark.parametrize(("text", "message"), [
    ("a.B required x=1", "login module a.B: missing ';' at the end"),
    ("a.B sometimes;", "login module a.B: control flag 'sometimes' is not one of required, "
                       "requisite, sufficient, optional"),
    ('a.B required x="1;', "unterminated quoted value in JAAS config"),
    ("a.B required x;", "login module a.B: expected key=value, got 'x'"),
    ("a.B required; c.D required;", "JAAS config property contains 2 login modules, should be "
                                    "1 module"),
    ("", "JAAS config property contains 0 login modules, should be 1 module"),
])
def test_mistakes_are_named(text, message):
    with pytest.raises(JaasConfigError) as e:
        parse_jaas_config(text)
    assert str(e.value) == message
