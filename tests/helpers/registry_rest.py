"""The registry's REST API as tests speak it, and ``_schemas``' end offset.

``call(url, method, path, body)`` is one request with the standard library: a JSON body
is sent as ``application/vnd.schemaregistry.v1+json`` (or ``data``, bytes as they are,
with the ``headers`` given); the answer is ``Answer`` (status, the parsed JSON or the
text, headers), error statuses included, never an exception.
``schemas_end_offset(bootstrap)`` is ``_schemas``' log end offset (0 before it exists).
The process itself: ``tests.helpers.registry_proc.RegistryProcess``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

SR_JSON = "application/vnd.schemaregistry.v1+json"


@dataclass
class Answer:
    status: int
    body: Any  # the JSON value, or the text when it is not JSON
    headers: dict[str, str]
    text: str

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").split(";")[0].strip()


def call(url: str, method: str, path: str, body: Any = None, *, data: bytes | None = None,
         headers: dict[str, str] | None = None, timeout: float = 30.0) -> Answer:
    """``body`` (JSON) or ``data`` (bytes as they are) to ``url + path``."""
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", SR_JSON)
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                 headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw, got = r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        status, raw, got = e.code, e.read(), dict(e.headers)
    text = raw.decode("utf-8", errors="replace")
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = text
    return Answer(status, value, got, text)


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
