"""A consume-transform-produce processor (exactly-once): run as a subprocess, kill -9 it.

``python -m tests.helpers.eos_processor BOOTSTRAP INPUT OUTPUT GROUP TXN_ID [PROTOCOL]`` reads
``INPUT`` with read_committed in group GROUP (static member: a restarted
instance takes the old one's place at once; with PROTOCOL ``consumer`` a dynamic
member of a KIP-848 group, whose offsets commit with its member epoch), and for each poll writes
``b"T:" + value`` to ``OUTPUT`` and commits the input offsets in the same
transaction (``send_offsets_to_transaction``). Runs until killed (exits 1 if a transaction
fails or the consumer hits a fatal error); prints
``ready`` once its first transaction committed.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer


def main(bootstrap: str, source: str, sink: str, group: str, txn_id: str,
         protocol: str = "classic") -> None:
    conf = {
        "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    }
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"group.instance.id": f"{group}-1", "session.timeout.ms": 6000})
    consumer = Consumer(conf)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5})
    producer.init_transactions(30)
    consumer.subscribe([source])
    announced = False
    while True:
        got = consumer.consume(200, 0.5)
        if any(m.error() is not None and m.error().code() == KafkaError._FATAL for m in got):
            # e.g. a static member whose session timed out (its coordinator was failing
            # over) heartbeats with the member id librdkafka already reset: fenced, fatal
            # (delivered as a _FATAL message whose fatal() is False; no error_cb call)
            sys.exit(1)
        msgs = [m for m in got if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(sink, key=m.key(), value=b"T:" + m.value())
        try:
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
        except KafkaException:
            sys.exit(1)  # a rebalance or fencing: the caller restarts us from committed offsets
        if not announced:
            print("ready", flush=True)
            announced = True


if __name__ == "__main__":
    main(*sys.argv[1:7])
