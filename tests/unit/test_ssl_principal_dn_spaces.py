"""The subject DN as Java's X500Principal prints it (RFC 2253) escapes a value's trailing
space (``\\ ``), as its leading one, and leaves inner spaces alone: a certificate for
``CN=alice `` is ``CN=alice\\ ``, which is what ssl.principal.mapping.rules see and what
ACLs name (User:CN=alice\\ ). Found by mutation: without the trailing-space escape every
existing test passed (they cover a leading space only)."""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from spool.security.ssl_principal import SslPrincipalMapper, format_name


def name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def test_a_trailing_space_is_escaped_an_inner_one_is_not():
    assert format_name(name("alice ")) == "CN=alice\\ ,O=Acme"
    assert format_name(name(" alice ")) == "CN=\\ alice\\ ,O=Acme"
    assert format_name(name("alice smith")) == "CN=alice smith,O=Acme"


def test_every_leading_and_trailing_space_is_escaped_as_java_17_prints_them():
    """X500Principal(...).getName(RFC2253) on Java 17 (run by hand): each space of a run at
    either end is escaped, and a '#' starting the value after leading spaces too."""
    assert format_name(name("  two leading")) == "CN=\\ \\ two leading,O=Acme"
    assert format_name(name("two trailing  ")) == "CN=two trailing\\ \\ ,O=Acme"
    assert format_name(name("   ")) == "CN=\\ \\ \\ ,O=Acme"
    assert format_name(name(" #x")) == "CN=\\ \\#x,O=Acme"
    assert format_name(name("#x  ")) == "CN=\\#x\\ \\ ,O=Acme"


def test_rules_see_the_escaped_form():
    mapper = SslPrincipalMapper("RULE:^CN=(.*),O=Acme$/$1/")
    assert mapper.name(format_name(name("alice "))) == "alice\\ "
