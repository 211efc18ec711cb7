"""Seed ``orders`` with sample orders spread over the last hour (key = customer).

    python -m examples.seed_orders [--bootstrap-server 127.0.0.1:9092] [--count 1000]
        [--topic orders] [--partitions 3]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from examples.common import add_bootstrap, run


def seed(bootstrap: str, topic: str, count: int, partitions: int = 3, seed: int = 7) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    if topic not in admin.list_topics(timeout=30).topics:
        for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            fut.result(30)
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                  "log_level": 3})
    for i in range(count):
        ts = now - 3_600_000 + i * 3_600_000 // count
        order = {"order_id": i, "amount": round(rng.uniform(1, 100), 2)}
        record = {"key": f"customer-{rng.randrange(10)}", "value": json.dumps(order),
                  "timestamp": ts}
        while True:
            try:
                p.produce(topic, **record)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                p.poll(0.1)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(60)


PROG = "python -m examples.seed_orders"


def main() -> None:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0].replace("``", ""),
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--topic", default="orders", help="the topic to fill (created if missing)")
    p.add_argument("--count", type=int, default=1000, help="orders to write")
    p.add_argument("--partitions", type=int, default=3,
                   help="partitions of the topic when this creates it")
    a = p.parse_args()
    seed(a.bootstrap, a.topic, a.count, a.partitions)
    print(f"{a.count} orders in {a.topic}")


if __name__ == "__main__":
    run(PROG, main)
