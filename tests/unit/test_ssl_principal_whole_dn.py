"""ssl.principal.mapping.rules: a rule applies only when its pattern matches the WHOLE
subject DN (Kafka's SslPrincipalMapper uses ``Matcher.matches()``), so an unanchored
pattern that matches a part of the DN does not apply, and the next rule decides. Found by
mutation: with ``search`` in place of a whole match every existing test passed (their
patterns are all anchored with ^...$ or .*); a client whose DN merely contains ``CN=x``
would have been named by a rule meant for a DN that is exactly that."""

from __future__ import annotations

import pytest

from spool.security.ssl_principal import NoMatchingRule, SslPrincipalMapper


def test_an_unanchored_rule_matching_part_of_the_dn_does_not_apply():
    mapper = SslPrincipalMapper("RULE:CN=([a-z]+)/$1/, DEFAULT")
    assert mapper.name("CN=alice") == "alice"  # the whole DN: the rule applies
    # a part only: the rule does not apply, DEFAULT gives the DN as it is
    assert mapper.name("CN=alice,OU=ops,O=acme") == "CN=alice,OU=ops,O=acme"
    assert mapper.name("OU=CN=mallory,O=acme") == "OU=CN=mallory,O=acme"


def test_a_partial_match_is_no_match():
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=alice,OU=ops"):
        SslPrincipalMapper("RULE:CN=([a-z]+)/$1/").name("CN=alice,OU=ops")
