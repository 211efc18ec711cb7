"""How long a ``GET /metrics`` scrape stalls the broker's event loop.

    python -m bench.scrape_stall [--partitions 2000] [--scrapes 5]

Runs a broker in this process (uvloop, as ``spool broker``) with the metrics endpoint on,
creates topics of ``--partitions`` partitions in all and, while a timer task on the broker's
loop wakes every millisecond and records how late it woke, scrapes ``/metrics`` from a
thread ``--scrapes`` times. Prints the scrape's size and, per scrape, its wall time and
the longest lateness of the timer during it (the longest time every client of the broker
waited for the loop), and the same lateness over an idle window for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

TICK_S = 0.001


class Ticker:
    """A task on the loop that records how late each of its 1 ms sleeps woke."""

    def __init__(self) -> None:
        self.worst = 0.0

    async def run(self) -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(TICK_S)
            self.worst = max(self.worst, time.monotonic() - t - TICK_S)


def create(bootstrap: str, partitions: int) -> None:
    """Topics wide-0, wide-1, ... of at most 5,000 partitions (a CreateTopics request
    may carry at most 10,000 metadata records)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    i = 0
    while partitions > 0:
        n = min(partitions, 5000)
        admin.create_topics([NewTopic(f"wide-{i}", n, 1)])[f"wide-{i}"].result(600)
        partitions -= n
        i += 1


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


async def main(args: argparse.Namespace) -> None:
    import spool.broker.handlers  # noqa: F401  (registers every handler)
    from spool.broker.broker import Broker
    from spool.broker.config import BrokerConfig

    tmp = Path(tempfile.mkdtemp(prefix="spool-scrape-"))
    config = BrokerConfig.load(None, [f"log.dirs={tmp / 'data'}",
                                      "listeners=PLAINTEXT://127.0.0.1:0",
                                      "metrics.listeners=http://127.0.0.1:0"])
    broker = Broker(config)
    await broker.start()
    try:
        host, port = broker.server.bound_listeners[config.cluster.listeners[0].name]
        await asyncio.to_thread(create, f"{host}:{port}", args.partitions)
        endpoint = broker.metrics_http.endpoints[0]
        url = f"http://{endpoint.host}:{endpoint.port}/metrics"
        body = await asyncio.to_thread(fetch, url)  # warm up
        samples = sum(1 for line in body.splitlines() if not line.startswith(b"#"))
        print(f"{args.partitions} partitions: {samples} samples, {len(body) / 1e6:.2f} MB")
        ticker = Ticker()
        task = asyncio.create_task(ticker.run())
        await asyncio.sleep(0.5)
        ticker.worst = 0.0
        await asyncio.sleep(1.0)
        print(f"idle 1 s: longest loop stall {ticker.worst * 1000:.1f} ms")
        for _ in range(args.scrapes):
            ticker.worst = 0.0
            t = time.monotonic()
            await asyncio.to_thread(fetch, url)
            wall = time.monotonic() - t
            print(f"scrape: {wall * 1000:.0f} ms, longest loop stall {ticker.worst * 1000:.1f} ms")
            await asyncio.sleep(0.2)
        task.cancel()
    finally:
        await broker.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--scrapes", type=int, default=5)
    import uvloop

    uvloop.run(main(parser.parse_args()))
