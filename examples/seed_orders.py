"""Seed ``orders`` with sample orders spread over the last hour (key = customer).

    python -m examples.seed_orders [--bootstrap 127.0.0.1:9092] [--count 1000] [--topic orders]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def seed(bootstrap: str, topic: str, count: int, partitions: int = 3, seed: int = 7) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=30).topics:
        for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            fut.result(30)
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for i in range(count):
        ts = now - 3_600_000 + i * 3_600_000 // count
        order = {"order_id": i, "amount": round(rng.uniform(1, 100), 2)}
        p.produce(topic, key=f"customer-{rng.randrange(10)}", value=json.dumps(order), timestamp=ts)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(60)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--topic", default="orders")
    p.add_argument("--count", type=int, default=1000)
    a = p.parse_args()
    seed(a.bootstrap, a.topic, a.count)
    print(f"{a.count} orders in {a.topic}")


if __name__ == "__main__":
    main()
