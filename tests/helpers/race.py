"""Clients racing each other on raw connections: each thread sends its request
``rounds`` times on one connection and records the error code it got back; a
connection the broker closed is recorded as a failure, never lost in a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tests.helpers.raw_client import RawClient

Ask = Callable[[RawClient], int]  # sends one request, returns the answer's error code


def race(bootstrap: str, rounds: int, clients: dict[str, tuple[int, Ask]]
         ) -> tuple[dict[str, list[int]], list[str]]:
    """Run ``threads`` threads of each named ``ask`` at once; returns the error codes
    by name and the failures ("name: ConnectionError(...)")."""
    codes: dict[str, list[int]] = {name: [] for name in clients}
    failures: list[str] = []

    def run(name: str, ask: Ask) -> None:
        c = RawClient(bootstrap)
        try:
            for _ in range(rounds):
                codes[name].append(ask(c))
        except ConnectionError as e:
            failures.append(f"{name}: {e!r}")
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(name, ask))
               for name, (n, ask) in clients.items() for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes, failures
