"""A real ``spool registry`` process for tests, and the registry's REST API as tests speak it.

``RegistryProcess(bootstrap, log_path, *extra)``: ``spool registry --bootstrap-server B
--listen http://127.0.0.1:0 EXTRA...`` in a child; ``start`` returns once it printed its
listening line (``url``), ``kill`` is kill -9, ``stop`` SIGTERM and its exit code.

``call(url, method, path, body)`` is one request with the standard library: a JSON body
is sent as ``application/vnd.schemaregistry.v1+json`` (or ``data``, bytes as they are,
with the ``headers`` given); the answer is ``Answer`` (status, the parsed JSON or the
text, headers), error statuses included, never an exception. ``ask(method, full_url,
body)`` is the same as ``(status, JSON)``, for asserting on both at once.
``schemas_end_offset(bootstrap)`` is ``_schemas``' log end offset (0 before it exists).
``roundtrip(bootstrap, topic, serialize, deserialize, values)`` produces the values
through a confluent-kafka serializer and consumes them back deserialized.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers import http
from tests.helpers.child_proc import ChildProcess
from tests.helpers.http import Answer

_LINE = re.compile(r"spool registry listening on (http://\S+) \(registry\)")


class RegistryProcess(ChildProcess):
    """``spool registry --bootstrap-server B --listen http://127.0.0.1:0`` in a child."""

    def __init__(self, bootstrap: str, log_path: Path, *extra: str) -> None:
        self.bootstrap = bootstrap
        self.log_path = Path(log_path)
        self.extra = list(extra)
        self.url = ""
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> RegistryProcess:
        cmd = [sys.executable, "-m", "spool.cli.main", "registry", "--bootstrap-server",
               self.bootstrap, "--listen", "http://127.0.0.1:0", *self.extra]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
        found: list[str] = []

        def read() -> None:
            assert self.proc and self.proc.stdout
            for line in self.proc.stdout:
                m = _LINE.search(line.decode(errors="replace"))
                if m:
                    found.append(m.group(1))

        threading.Thread(target=read, daemon=True).start()
        self.wait_ready("registry", lambda: bool(found), timeout)
        self.url = found[0]
        return self


SR_JSON = "application/vnd.schemaregistry.v1+json"


def call(url: str, method: str, path: str, body: Any = None, **kw: Any) -> Answer:
    """``http.call`` with the registry's content type for a JSON ``body``."""
    return http.call(url, method, path, body, content_type=SR_JSON, **kw)


def ask(method: str, url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    """``call`` to a full URL as ``(status, decoded answer)``."""
    a = call(url, method, "", body, headers={"Accept": SR_JSON}, timeout=timeout)
    return a.status, a.body


def schemas_end_offset(bootstrap: str, topic: str = "_schemas") -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offset-probe",
                  "enable.auto.commit": False})
    try:
        if topic not in c.list_topics(timeout=10).topics:
            return 0
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def roundtrip(bootstrap: str, topic: str, serialize: Callable, deserialize: Callable,
              values: list) -> list[tuple[bytes, Any]]:
    """Produce each value serialized to ``topic``; consume them back: (raw, deserialized)
    for each, in order (until as many as sent, or 30 s)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, serialize(value, ctx))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[tuple[bytes, Any]] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            raw = msg.value()
            got.append((raw, deserialize(raw, ctx)))
    finally:
        consumer.close()
    return got
