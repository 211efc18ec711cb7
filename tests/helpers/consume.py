"""Reading a topic back in tests: ``consume_values`` consumes from the start of the given
partitions until it has at least ``want`` values and a poll brings nothing more, or until
``wait_s`` seconds pass, and returns the values read (errors skipped)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition


def consume_values(config: dict[str, Any], topic: str, partitions: int, want: int,
                   wait_s: float) -> list[bytes]:
    c = Consumer(config)
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            msgs = c.consume(1000, 0.5)
            out += [m.value() for m in msgs if m.error() is None]
            if len(out) >= want and not msgs:
                break
    finally:
        c.close()
    return out
