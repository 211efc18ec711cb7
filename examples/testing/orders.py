"""The code under test: orders go to Kafka keyed by customer; totals are read back.

``publish(bootstrap, topic, orders)`` writes each order as JSON with the customer as
the key (so one customer's orders stay in order on one partition) and waits until
every one is acknowledged. ``totals(bootstrap, topic, group)`` reads the topic as the
consumer group ``group`` from its committed position (from the start the first time)
until it has caught up, commits, and returns the amount per customer.
"""

from __future__ import annotations

import json
from collections import Counter

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer


def publish(bootstrap: str, topic: str, orders: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for order in orders:
        producer.produce(topic, key=order["customer"], value=json.dumps(order))
    if producer.flush(30):
        raise KafkaException("orders were not all delivered")


def totals(bootstrap: str, topic: str, group: str) -> dict[str, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.subscribe([topic])
    sums: Counter[str] = Counter()
    at_end: set[int] = set()
    read = 0
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(msg.error())
                at_end.add(msg.partition())
                if at_end >= {tp.partition for tp in consumer.assignment()}:
                    break
                continue
            at_end.discard(msg.partition())
            read += 1
            order = json.loads(msg.value())
            sums[order["customer"]] += order["amount"]
        if read:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return dict(sums)
