"""A client's address as Kafka sees it: Java's ``InetAddress.getHostAddress``.

Kafka compares an ACL's host with the client's address printed by Java, and Java prints
an IPv6 address in full, uncompressed, lower-case hex without leading zeros
(``0:0:0:0:0:0:0:1`` for ``::1``, ``fe80:0:0:0:0:0:0:1%eth0`` with a scope), and an
IPv4-mapped IPv6 address (``::ffff:127.0.0.1``, a v4 client on a dual-stack socket) as
the IPv4 address it is. ``java_host_address`` gives that form for any text Python's
sockets give; text that is not an address (a host name) comes back unchanged.
"""

from __future__ import annotations

import ipaddress


def java_host_address(host: str) -> str:
    """``host`` as Java's ``InetAddress.getHostAddress`` prints it (module doc)."""
    if ":" not in host:
        return host  # IPv4 (Java prints it as Python does), or a name
    address, sep, scope = host.partition("%")
    try:
        ip = ipaddress.IPv6Address(address)
    except ValueError:
        return host
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    text = ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))
    return text + sep + scope
