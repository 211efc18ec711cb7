"""Free port ranges for tests that start nodes on fixed ports (``spool cluster up``)."""

from __future__ import annotations

import random
import socket

CONTROLLER_PORT_OFFSET = 100  # spool.cli.local_cluster's: CONTROLLER ports sit 100 above


def free_base_port(nodes: int) -> int:
    """A base port whose PLAINTEXT and CONTROLLER ports for ``nodes`` nodes are all free now
    (another process may still take one before the test binds it: rare, and it fails loudly)."""
    for _ in range(100):
        base = random.randrange(20000, 40000)
        ports = [base + i for i in range(nodes)]
        ports += [p + CONTROLLER_PORT_OFFSET for p in ports]
        socks = []
        try:
            for p in ports:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def ipv6_loopback() -> bool:
    """Whether this machine can bind ::1 (the IPv6 tests skip, saying so, where it cannot)."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False
