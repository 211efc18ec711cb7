"""A full disk: KAFKA_STORAGE_ERROR per partition, the broker stays up and serves,
writing resumes when space returns, and nothing acknowledged is lost.

The log dir is a real 8 MiB tmpfs (we run as root in CI); freeing space is
``mount -o remount,size=64m``.
"""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import ApiVersionsRequest, DeleteRecordsRequest, MetadataRequest
from spool.protocol._generated.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import Errors
from spool.records.builder import BatchBuilder
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient
from tests.integration.test_bad_input import produce

PID = 4242
RECORD = 30_000
T0 = 1_700_000_000_000
LATER = T0 + 8 * 86_400_000  # past segment.ms (7 days) of record time: the segment rolls
PAGE = 4096


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def grow(mnt) -> None:
    subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)


def idempotent_batch(seq: int, size: int = RECORD, ts: int = T0) -> bytes:
    b = BatchBuilder(producer_id=PID, producer_epoch=0, base_sequence=seq)
    for i in range(3):
        b.append(b"k", b"%08d-%d-" % (seq, i) + b"x" * size, timestamp=ts)
    return b.build()


def batch_of(n: int) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(b"k", b"v%d" % i, timestamp=T0)
    return b.build()


def delete_records(c: RawClient, topic: str, offset: int) -> tuple[int, int]:
    req = DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsTopic(
        name=topic, partitions=[DeleteRecordsPartition(partition_index=0, offset=offset)])])
    r = c.request(21, 2, req).topics[0].partitions[0]
    return r.error_code, r.low_watermark


def fill(path) -> None:
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"r" * PAGE)
        except OSError:
            pass


def serves(bootstrap: str, topic: str) -> None:
    c = RawClient(bootstrap)
    try:
        assert c.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                    client_software_version="1")).error_code == 0
        md = c.request(3, 1, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
        assert md.topics[0].error_code == 0
    finally:
        c.close()


def stored(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full",
                  "enable.auto.commit": False, "fetch.max.bytes": 4 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    try:
        empty = 0
        while empty < 6:
            msgs = [m for m in c.consume(200, 0.5) if m.error() is None]
            empty = 0 if msgs else empty + 1
            out += [m.value()[:11] for m in msgs]
        return out
    finally:
        c.close()


class Writer:
    """Idempotent batches on one connection; remembers what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.client = RawClient(bootstrap)
        self.seq = 0
        self.acked: list[bytes] = []

    def send(self, size: int = RECORD, ts: int = T0) -> int:
        r = produce(self.client, "full", idempotent_batch(self.seq, size, ts))
        if r.error_code == 0:
            self.acked += [b"%08d-%d-" % (self.seq, i) for i in range(3)]
            self.seq += 3
        return r.error_code


def test_full_disk_is_a_storage_error_and_writing_resumes(small_disk, tmp_path):
    broker = BrokerProcess(small_disk / "data", {"log.segment.bytes": "1048576"})
    broker.log_path = tmp_path / "broker.log"  # not on the full disk
    broker.data_dir.mkdir()
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("full", 1, config={"index.interval.bytes": "1"})])[
            "full"].result(10)
        admin.create_topics([NewTopic("other", 1)])["other"].result(10)
        c = RawClient(broker.bootstrap)
        assert produce(c, "other", batch_of(3)).error_code == 0
        pads = []
        for i in range(4):  # pages we can give back one at a time
            pads.append(small_disk / f"pad-{i}")
            pads[-1].write_bytes(b"p" * PAGE)
        w = Writer(broker.bootstrap)
        errors = []
        for _ in range(400):  # 8 MiB / 90 KB a batch: full long before this
            if (code := w.send()) != 0:
                errors.append(code)
                if len(errors) == 2:
                    break
        assert errors == [Errors.KAFKA_STORAGE_ERROR] * 2 and len(w.acked) > 30
        fill(small_disk / "rest")  # the failed writes gave back their pages: take the last ones
        # a roll on a full disk: the new segment and the producer snapshot cannot be written
        assert w.send(size=50, ts=LATER) == Errors.KAFKA_STORAGE_ERROR
        assert broker.proc.poll() is None
        serves(broker.bootstrap, "full")  # other requests, on other connections, still served
        # DeleteRecords cannot checkpoint the new log start: an error, the connection stays
        assert delete_records(c, "other", 1) == (Errors.KAFKA_STORAGE_ERROR, -1)
        serves(broker.bootstrap, "other")
        # one page back: small batches fill it, each adding an index entry (interval 1 byte)
        pads.pop().unlink()
        codes = [w.send(size=50, ts=LATER) for _ in range(8)]
        assert codes[0] == 0 and set(codes) <= {0, Errors.KAFKA_STORAGE_ERROR}
        assert broker.proc.poll() is None
        # restarted on the still full disk, it starts, recovers and serves
        broker.kill()
        broker.start()
        serves(broker.bootstrap, "full")
        w.client.close()
        w.client = RawClient(broker.bootstrap)
        grow(small_disk)
        for _ in range(5):  # the sequence a failed write did not use is still the next one
            assert w.send() == 0
        w.client.close()
        c = RawClient(broker.bootstrap)
        assert delete_records(c, "other", 2) == (0, 2)
        c.close()
        assert stored(broker.bootstrap, "full") == w.acked
    finally:
        broker.stop()
