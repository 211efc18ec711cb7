"""The FileStream connectors (spool.connect.file), driven through the task interfaces with
real files, then in a real `spool connect --standalone` worker over a real broker (file ->
topic -> file, stopped and restarted)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from spool.connect import api, data
from spool.connect.api import ConfigError, ConnectError, SinkRecord
from spool.connect.data import Struct
from spool.connect.file import (
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from tests.helpers.connect_proc import ConnectProcess, wait_until, write_properties


class Offsets(api.OffsetStorageReader):
    """The committed offsets a source task reads (the runtime's offset store's part)."""

    def __init__(self, committed: dict[str, dict] | None = None) -> None:
        self.committed = committed or {}

    def offset(self, partition: dict) -> dict | None:
        return self.committed.get(partition["filename"])


class Context(api.SourceTaskContext):
    def __init__(self, reader: api.OffsetStorageReader) -> None:
        self.offset_storage_reader = reader
        self.configs = {}


def source(path: Path, committed: dict | None = None, **props) -> FileStreamSourceTask:
    t = FileStreamSourceTask()
    t.initialize(Context(Offsets({str(path): committed} if committed else None)))
    t.start({"file": str(path), "topic": "lines", **props})
    return t


def poll_all(task: FileStreamSourceTask) -> list[api.SourceRecord]:
    out: list[api.SourceRecord] = []
    while batch := task.poll():
        out += batch
    return out


def test_source_reads_lines_with_kafkas_partition_offset_and_schema(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"alpha\r\nbeta\rgamma\n\nd\xc3\xa9lta\npart")
    task = source(path)
    try:
        records = poll_all(task)
        assert [r.value for r in records] == ["alpha", "beta", "gamma", "", "délta"]
        assert [r.source_offset for r in records] == [
            {"position": 7}, {"position": 12}, {"position": 18}, {"position": 19},
            {"position": 26}]
        r = records[0]
        assert (r.topic, r.key, r.key_schema, r.value_schema, r.source_partition) == (
            "lines", None, None, data.STRING, {"filename": str(path)})
        with path.open("ab") as f:
            f.write(b"ial\r")  # the line's end may still be \r\n: not produced yet
        assert task.poll() == []
        with path.open("ab") as f:
            f.write(b"\nlast\n")
        assert [(r.value, r.source_offset["position"]) for r in poll_all(task)] == [
            ("partial", 35), ("last", 40)]
        assert path.stat().st_size == 40
    finally:
        task.stop()


def test_source_restarts_at_the_committed_position_and_honours_batch_size(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(f"line {i}\n" for i in range(25)))
    task = source(path, **{"batch.size": "10"})
    try:
        batches = [task.poll(), task.poll(), task.poll()]
        assert [len(b) for b in batches] == [10, 10, 5]
        committed = batches[1][-1].source_offset  # what the runtime committed before a crash
    finally:
        task.stop()
    again = source(path, committed)
    try:
        assert [r.value for r in poll_all(again)] == [f"line {i}" for i in range(20, 25)]
    finally:
        again.stop()


def test_source_waits_for_the_file_and_stop_ends_a_waiting_poll(tmp_path):
    path = tmp_path / "later.txt"
    task = source(path)
    try:
        assert task.poll() == []  # not there yet
        path.write_text("now\n")
        assert [r.value for r in task.poll()] == ["now"]
        result: list = []
        poller = threading.Thread(target=lambda: result.append(task.poll()))
        poller.start()  # nothing new: the poll waits
        task.stop()
        poller.join(10)
        assert not poller.is_alive() and result == [[]]
    finally:
        task.stop()


def test_source_refuses_a_bad_stored_offset_and_bad_configs(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("x\n")
    task = source(path, {"position": "7"})
    with pytest.raises(ConnectError, match="Offset position is the incorrect type"):
        task.poll()
    task.stop()
    c = FileStreamSourceConnector()
    errors = {k: v.errors for k, v in c.validate({"topic": "", "batch.size": "x"}).items()
              if v.errors}
    assert errors == {"topic": ["Invalid value  for configuration topic: String must be "
                                "non-empty"],
                      "batch.size": ["Invalid value x for configuration batch.size: Not a "
                                     "number of type INT"]}
    with pytest.raises(ConfigError, match="topic"):
        c.start({"file": str(path)})
    c.start({"file": str(path), "topic": "t"})
    assert c.task_configs(4) == [{"file": str(path), "topic": "t"}]
    assert c.exactly_once_support({"file": "f", "topic": "t"}) == "SUPPORTED"
    assert c.exactly_once_support({"topic": "t"}) == "UNSUPPORTED"
    assert c.alter_offsets({"file": "f"}, {(("filename", "f"),): {"position": 3}})
    with pytest.raises(ConnectError, match="non-negative"):
        c.alter_offsets({"file": "f"}, {(("filename", "f"),): {"position": -1}})


def test_sink_appends_values_as_java_prints_them_and_flush_makes_them_durable(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("before\n")
    schema = data.struct("s", [("a", data.INT32), ("b", data.OPTIONAL_STRING),
                               ("c", data.OPTIONAL_STRING)])
    values = ["text", None, 42, True, Struct(schema, {"a": 1, "b": "x"}), {"k": [1, 2]},
              b"raw"]
    c = FileStreamSinkConnector()
    c.start({"file": str(path), "topics": "t"})
    assert len(c.task_configs(3)) == 3
    task = FileStreamSinkTask()
    task.start(c.task_configs(1)[0])
    try:
        task.put([SinkRecord("t", 0, None, None, None, v, kafka_offset=i)
                  for i, v in enumerate(values)])
        assert task.pre_commit({("t", 0): 7}) == {("t", 0): 7}
        assert path.read_text().splitlines() == [
            "before", "text", "null", "42", "true", "Struct{a=1,b=x}", "{k=[1, 2]}", "raw"]
    finally:
        task.stop()
    with pytest.raises(ConnectError, match="Couldn't find or create file"):
        FileStreamSinkTask().start({"file": str(tmp_path / "no" / "such" / "dir")})


# ---- through the runtime: a `spool connect --standalone` process

def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_a_standalone_worker_copies_a_file_through_a_topic(broker, tmp_path, topic_name):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i} é" for i in range(600)]
    src.write_text("".join(f"{x}\n" for x in lines[:300]), encoding="utf-8")
    string = "org.apache.kafka.connect.storage.StringConverter"
    uid = uuid.uuid4().hex[:8]  # the sink's group is connect-<name> on the shared broker
    source_name, sink_name = f"file-source-{uid}", f"file-sink-{uid}"
    worker_props = {"bootstrap.servers": broker.bootstrap,
                    "offset.storage.file.filename": str(tmp_path / "worker.offsets"),
                    "offset.flush.interval.ms": "500",
                    "key.converter": string, "value.converter": string}
    files = [write_properties(tmp_path / "source.properties", {
                 "name": source_name, "connector.class": "FileStreamSource",
                 "tasks.max": "1", "file": str(src), "topic": topic_name}),
             write_properties(tmp_path / "sink.properties", {
                 "name": sink_name,
                 "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                 "tasks.max": "1", "file": str(out), "topics": topic_name})]
    worker = ConnectProcess(tmp_path / "worker", worker_props, standalone=True,
                            connector_files=files)
    try:
        worker.start()
        worker.wait_running(source_name, 1)
        worker.wait_running(sink_name, 1)
        wait_until(lambda: _lines(out) == lines[:300], 60, what="the first 300 lines")
        with src.open("a", encoding="utf-8") as f:
            f.write("".join(f"{x}\n" for x in lines[300:400]))
        wait_until(lambda: _lines(out) == lines[:400], 60, what="400 lines")
        assert worker.stop() == 0  # a clean stop commits both connectors' offsets
        with src.open("a", encoding="utf-8") as f:
            f.write("".join(f"{x}\n" for x in lines[400:]))
        worker.restart()
        wait_until(lambda: _lines(out) == lines, 60, what="all 600 lines, none twice")
        plugins = worker.call("GET", "/connector-plugins").body
        assert {"class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "type": "source"} in [{k: p[k] for k in ("class", "type")} for p in plugins]
    finally:
        worker.kill()
