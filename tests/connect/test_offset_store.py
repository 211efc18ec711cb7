"""Offset stores: Kafka's connect-offsets record format on a real broker, and the file."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from spool.connect.offset_store import FileOffsetStore, KafkaOffsetStore
from spool.connect.worker_config import WorkerConfig


def _worker(bootstrap: str, partitions: int = 5) -> WorkerConfig:
    group = f"offsets-{uuid.uuid4().hex[:8]}"
    return WorkerConfig.from_props({
        "bootstrap.servers": bootstrap, "group.id": group,
        "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "offset.storage.partitions": str(partitions)}, standalone=False)


def _raw_records(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, eof = [], set()
        while len(eof) < partitions:
            m = c.poll(5)
            assert m is not None, "no end of partition within 5 s"
            if m.error():
                eof.add(m.partition())
                continue
            out.append((m.key(), m.value()))
        return out
    finally:
        c.close()


def test_kafka_offsets_in_kafkas_format_and_read_back_by_another_worker(broker):
    worker = _worker(broker.bootstrap)
    store = KafkaOffsetStore(worker)
    other = KafkaOffsetStore(worker)
    try:
        store.start()
        assert store.get("pg", {"server": "db1"}) is None
        store.put("pg", [({"server": "db1"}, {"lsn": 100, "txId": 7}),
                         ({"server": "db2"}, {"lsn": 5})], timeout=10)
        store.put("file", [({"filename": "/tmp/a"}, {"position": 42})], timeout=10)
        store.put("pg", [({"server": "db1"}, {"lsn": 200, "txId": 9})], timeout=10)
        # durable when put returns, and visible to this store at once
        assert store.get("pg", {"server": "db1"}) == {"lsn": 200, "txId": 9}
        assert store.reader("file").offset({"filename": "/tmp/a"}) == {"position": 42}
        assert store.reader("pg").offset({"filename": "/tmp/a"}) is None

        other.start()  # a new worker replays the topic
        assert sorted(other.connector_offsets("pg"), key=lambda po: po[0]["server"]) == [
            ({"server": "db1"}, {"lsn": 200, "txId": 9}), ({"server": "db2"}, {"lsn": 5})]
        assert other.connectors() == {"pg", "file"}

        store.put("pg", [({"server": "db2"}, None)], timeout=10)  # a reset (tombstone)
        other.read_to_end(10)  # what another worker wrote is seen once it returns
        assert other.connector_offsets("pg") == [({"server": "db1"}, {"lsn": 200, "txId": 9})]
    finally:
        store.stop()
        other.stop()

    raw = _raw_records(broker.bootstrap, store.topic, 5)
    assert (b'["pg",{"server":"db1"}]', b'{"lsn":100,"txId":7}') in raw
    assert (b'["file",{"filename":"/tmp/a"}]', b'{"position":42}') in raw
    assert (b'["pg",{"server":"db2"}]', None) in raw
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(admin.list_topics(store.topic, timeout=10).topics[store.topic].partitions) == 5


def test_records_written_by_others_in_kafkas_format_are_read(broker):
    """What a Java worker (or the exactly-once producer through record()) writes."""
    worker = _worker(broker.bootstrap, partitions=3)
    store = KafkaOffsetStore(worker)
    try:
        store.start()
        key, value = store.record("src", {"b": 2, "a": "x"}, {"pos": 1})
        assert (key, value) == (b'["src",{"a":"x","b":2}]', b'{"pos":1}')
        store._log.send(key, value)
        store._log.send(b'{"not": "a pair"}', b'{"pos": 9}')  # ignored, as Kafka does
        store._log.send(b'["src",{"a":"x","b":2}]', b"not json")  # ignored
        # a Java worker's key order differs: the same partition
        store._log.send(b'["src", {"b": 2, "a": "x"}]', b'{"pos": 3}')
        assert store._log.flush(10) == 0
        store._log.read_to_end(10)
        assert store.get("src", {"a": "x", "b": 2}) == {"pos": 3}
        assert store.connectors() == {"src"}
    finally:
        store.stop()


def test_file_offsets_survive_a_restart_and_tombstones_remove(tmp_path):
    path = tmp_path / "offsets" / "connect.offsets"
    store = FileOffsetStore(path)
    store.start()
    store.put("file", [({"filename": "/a"}, {"position": 10}),
                       ({"filename": "/b"}, {"position": 20})], timeout=1)
    store.put("file", [({"filename": "/a"}, {"position": 11})], timeout=1)
    store.put("other", [({"p": 1}, {"o": 1})], timeout=1)
    store.put("other", [({"p": 1}, None)], timeout=1)
    store.stop()
    assert not (tmp_path / "offsets" / "connect.offsets.tmp").exists()
    pairs = json.loads(path.read_text())
    assert sorted(pairs) == [['["file",{"filename":"/a"}]', '{"position":11}'],
                             ['["file",{"filename":"/b"}]', '{"position":20}']]

    again = FileOffsetStore(path)
    again.start()
    again.read_to_end(1)  # nothing to read: the file is the store
    assert again.reader("file").offset({"filename": "/a"}) == {"position": 11}
    assert again.get("file", {"filename": "/b"}) == {"position": 20}
    assert again.connectors() == {"file"}
    assert again.topic is None
