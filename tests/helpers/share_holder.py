"""A share consumer that acquires records and never acknowledges them, to be killed with -9.

    python -m tests.helpers.share_holder BOOTSTRAP GROUP TOPIC

Subscribes a ShareConsumer (explicit acknowledgement mode) to TOPIC in GROUP,
polls until a poll returns records, prints one JSON line
``{"offsets": [...], "delivery_counts": [...]}`` on stdout, then keeps the
records acquired (no acknowledge, no further poll, no close) until it is killed.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import ShareConsumer

from tests.helpers.share import consumer_config


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    c = ShareConsumer(consumer_config(bootstrap, group, explicit=True,
                                      **{"max.poll.interval.ms": 600_000}))
    c.subscribe([topic])
    while True:
        msgs = [m for m in c.poll(0.5) if m.error() is None]
        if msgs:
            break
    print(json.dumps({"offsets": [m.offset() for m in msgs],
                      "delivery_counts": [m.delivery_count() for m in msgs]}), flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
