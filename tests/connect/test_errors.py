"""ErrorHandler: retries, errors.tolerance, the error log and the dead letter queue
(a real broker: the DLQ records are read back with confluent-kafka)."""

from __future__ import annotations

import logging
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from spool.connect import api
from spool.connect.connector_config import ConnectorConfig
from spool.connect.data import DataError
from spool.connect.errors import ErrorHandler, Original
from spool.connect.herder import TaskId
from spool.connect.plugins import Plugins
from spool.connect.worker_config import WorkerConfig


class NullSink(api.SinkConnector):
    def start(self, props):
        pass

    def task_class(self):
        return api.SinkTask

    def task_configs(self, max_tasks):
        return [{}]


class Converter:
    """Stands for a converter: the executing class reported."""

    def to_connect_data(self, data: bytes):
        raise DataError(f"Converting byte[] to Kafka Connect data failed: {data!r}")


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    p = Plugins.discover()
    p.register("test.NullSink", NullSink)
    return p


def _cfg(plugins: Plugins, **props: str) -> ConnectorConfig:
    worker = WorkerConfig.from_props({"offset.storage.file.filename": "/dev/null"},
                                     standalone=True)
    return ConnectorConfig({"name": "errs", "connector.class": "test.NullSink",
                            "topics": "in", **props}, plugins, worker)


class Flaky:
    def __init__(self, failures: int, error: type[Exception] = api.RetriableError) -> None:
        self.failures = failures
        self.calls = 0
        self.error = error

    def __call__(self, x: int) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"attempt {self.calls} failed")
        return x * 2


def test_retriable_errors_are_retried_until_the_timeout(plugins):
    handler = ErrorHandler(_cfg(plugins, **{"errors.retry.timeout": "30000"}), {},
                           TaskId("errs", 0))
    flaky = Flaky(2)
    assert handler.execute("TASK_PUT", flaky, 21) == 42
    assert flaky.calls == 3 and handler.failures == 0

    no_retry = ErrorHandler(_cfg(plugins), {}, TaskId("errs", 0))  # errors.retry.timeout=0
    once = Flaky(1)
    with pytest.raises(api.ConnectError, match="Tolerance exceeded in error handler") as e:
        no_retry.execute("TASK_PUT", once, 1)
    assert once.calls == 1 and isinstance(e.value.__cause__, api.RetriableError)


def test_stop_ends_the_backoff_and_fails_the_operation(plugins):
    handler = ErrorHandler(_cfg(plugins, **{"errors.retry.timeout": "-1",
                                            "errors.tolerance": "all"}), {}, 3)
    calls = []

    def always(_):
        calls.append(1)
        if len(calls) == 2:
            handler.stop()
        raise api.RetriableError("down")

    assert handler.execute("KAFKA_PRODUCE", always, None) is ErrorHandler.SKIP
    assert len(calls) == 2 and handler.failures == 1


def test_tolerance_none_fails_and_all_skips_in_the_tolerated_stages(plugins):
    none = ErrorHandler(_cfg(plugins), {}, TaskId("errs", 1))
    with pytest.raises(api.ConnectError, match="Tolerance exceeded in error handler") as e:
        none.execute("VALUE_CONVERTER", Converter().to_connect_data, b"x")
    assert isinstance(e.value.__cause__, DataError)

    tolerant = ErrorHandler(_cfg(plugins, **{"errors.tolerance": "all"}), {}, TaskId("errs", 1))
    assert tolerant.execute("VALUE_CONVERTER", Converter().to_connect_data, b"x") \
        is ErrorHandler.SKIP
    assert tolerant.execute("TRANSFORMATION", Flaky(1, ValueError), 2) is ErrorHandler.SKIP
    assert tolerant.failures == 2
    # a task's own non-retriable error is never tolerated (Kafka's operator)
    with pytest.raises(api.ConnectError, match="Unhandled exception in error handler"):
        tolerant.execute("TASK_PUT", Flaky(1, api.ConnectError), 2)


def test_errors_are_logged_when_enabled(plugins, caplog):
    handler = ErrorHandler(_cfg(plugins, **{"errors.tolerance": "all", "errors.log.enable":
                                            "true", "errors.log.include.messages": "true"}),
                           {}, TaskId("errs", 2))
    original = Original("in", 3, 17, b"k", b"v", timestamp=1700000000000)
    with caplog.at_level(logging.ERROR, logger="spool.connect.errors"):
        handler.execute("VALUE_CONVERTER", Converter().to_connect_data, b"v",
                        original=original)
    assert [r.getMessage() for r in caplog.records] == [
        "Error encountered in task errs-2. Executing stage 'VALUE_CONVERTER' with class "
        "'tests.connect.test_errors.Converter', where consumed record is {topic='in', "
        "partition=3, offset=17, timestamp=1700000000000}."]


def _read_all(bootstrap: str, topic: str, n: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dlq-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        while len(out) < n:
            m = c.poll(10)
            assert m is not None, f"only {len(out)} of {n} records in {topic}"
            assert m.error() is None
            out.append(m)
        return out
    finally:
        c.close()


def test_the_original_record_goes_to_the_dead_letter_queue_with_context(plugins, broker):
    source_topic = f"errs-in-{uuid.uuid4().hex[:8]}"
    dlq = f"errs-dlq-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(source_topic, key=b"key-1", value=b"not json", headers=[("h", b"1")],
              timestamp=1700000000123)
    p.produce(source_topic, key=b"key-2", value=b"{]")
    assert p.flush(10) == 0
    consumed = _read_all(broker.bootstrap, source_topic, 2)

    cfg = _cfg(plugins, **{"topics": source_topic, "errors.tolerance": "all",
                           "errors.deadletterqueue.topic.name": dlq,
                           "errors.deadletterqueue.context.headers.enable": "true"})
    handler = ErrorHandler(cfg, {"bootstrap.servers": broker.bootstrap}, TaskId("errs", 4))
    try:
        for m in consumed:
            assert handler.execute("VALUE_CONVERTER", Converter().to_connect_data, m.value(),
                                   original=m) is ErrorHandler.SKIP
        handler.flush(10)
    finally:
        handler.close()

    got = _read_all(broker.bootstrap, dlq, 2)
    assert [(m.key(), m.value()) for m in got] == [(b"key-1", b"not json"), (b"key-2", b"{]")]
    assert got[0].timestamp()[1] == 1700000000123
    headers = dict(got[0].headers())
    assert headers["h"] == b"1"
    assert {k: v for k, v in headers.items() if k != "__connect.errors.exception.stacktrace"} == {
        "h": b"1",
        "__connect.errors.topic": source_topic.encode(),
        "__connect.errors.partition": b"0",
        "__connect.errors.offset": b"0",
        "__connect.errors.connector.name": b"errs",
        "__connect.errors.task.id": b"4",
        "__connect.errors.stage": b"VALUE_CONVERTER",
        "__connect.errors.class.name": b"tests.connect.test_errors.Converter",
        "__connect.errors.exception.class.name": b"spool.connect.data.DataError",
        "__connect.errors.exception.message":
            b"Converting byte[] to Kafka Connect data failed: b'not json'",
    }
    assert b"DataError" in headers["__connect.errors.exception.stacktrace"]
    assert dict(got[1].headers())["__connect.errors.offset"] == b"1"


def test_without_context_headers_only_the_original_headers_are_kept(plugins, broker):
    dlq = f"errs-dlq-{uuid.uuid4().hex[:8]}"
    cfg = _cfg(plugins, **{"errors.tolerance": "all",
                           "errors.deadletterqueue.topic.name": dlq})
    handler = ErrorHandler(cfg, {"bootstrap.servers": broker.bootstrap}, TaskId("errs", 0))
    try:
        handler.execute("KEY_CONVERTER", Converter().to_connect_data, b"k",
                        original=Original("in", 0, 5, b"k", None, (("a", b"b"),)))
        handler.flush(10)
    finally:
        handler.close()
    [m] = _read_all(broker.bootstrap, dlq, 1)
    assert (m.key(), m.value(), m.headers()) == (b"k", None, [("a", b"b")])
