"""A consumer-protocol (KIP-848) group member in its own process, for kill -9 tests.

``python -m tests.helpers.kip848_member BOOTSTRAP GROUP ASSIGNOR INSTANCE TOPICS``
runs a confluent-kafka ``Consumer`` with ``group.protocol=consumer`` and
``group.remote.assignor=ASSIGNOR`` (INSTANCE ``-``: dynamic member, else its
``group.instance.id``), subscribed to TOPICS (comma-separated; one starting
with ``^`` is a regex the broker resolves). It prints one JSON line per event
for ``tests.helpers.assignment_history``, each stamped ``t=time.monotonic()``:
``assign`` (stamped when the callback starts), ``revoke``/``lost`` (when it
ends), ``msg`` (topic, partition, offset), ``started``, ``closed``.
SIGTERM closes the consumer (it leaves the group; a static member with epoch -2).
"""

from __future__ import annotations

import json
import signal
import sys
import time

from confluent_kafka import Consumer


def out(ev: str, t: float | None = None, **kw) -> None:
    kw.update(ev=ev, t=time.monotonic() if t is None else t)
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def parts_of(partitions) -> list[list]:
    return sorted([p.topic, p.partition] for p in partitions)


def main(bootstrap: str, group: str, assignor: str, instance: str, topics: str) -> None:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "group.remote.assignor": assignor,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        "fetch.wait.max.ms": 100,
    }
    if instance != "-":
        conf["group.instance.id"] = instance
    consumer = Consumer(conf)

    def on_assign(c, partitions) -> None:
        t = time.monotonic()
        c.incremental_assign(partitions)
        out("assign", t, parts=parts_of(partitions))

    def on_revoke(c, partitions) -> None:
        c.incremental_unassign(partitions)
        out("revoke", parts=parts_of(partitions))

    def on_lost(c, partitions) -> None:
        c.incremental_unassign(partitions)
        out("lost", parts=parts_of(partitions))

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer.subscribe(topics.split(","), on_assign=on_assign, on_revoke=on_revoke,
                       on_lost=on_lost)
    out("started")
    while not stopping:
        m = consumer.poll(0.05)
        if m is None:
            continue
        if m.error() is not None:
            out("error", error=str(m.error()))
            continue
        out("msg", topic=m.topic(), p=m.partition(), o=m.offset())
    consumer.close()
    out("closed")


if __name__ == "__main__":
    main(*sys.argv[1:6])
