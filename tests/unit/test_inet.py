"""java_host_address: the client's address in the form Kafka's ACLs and quotas match."""

from __future__ import annotations

import pytest

from spool.util.inet import java_host_address


@pytest.mark.parametrize(("given", "java"), [
    ("::1", "0:0:0:0:0:0:0:1"),
    ("::", "0:0:0:0:0:0:0:0"),
    ("2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"),
    ("2001:0DB8:0000:0000:0000:0000:0000:0001", "2001:db8:0:0:0:0:0:1"),
    ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
    ("::ffff:127.0.0.1", "127.0.0.1"),  # a v4 client on a dual-stack socket
    ("127.0.0.1", "127.0.0.1"),
    ("0:0:0:0:0:0:0:1", "0:0:0:0:0:0:0:1"),
    ("broker.example", "broker.example"),
    ("", ""),
])
def test_addresses_print_as_javas_inetaddress_does(given, java):
    assert java_host_address(given) == java
