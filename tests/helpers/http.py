"""An HTTP call for the tests of Spool's HTTP services (the registry, Connect's REST API).

``call(url, method, path, body=None, *, data=None, headers=None, timeout=30,
content_type="application/json")``: ``body`` is sent as JSON with ``content_type``,
``data`` as the bytes it is; the answer is an ``Answer`` (``status``, ``body``: the JSON
value, the text when it is not JSON, None when empty; ``headers``; ``text``;
``content_type``) whatever the status.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


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
         headers: dict[str, str] | None = None, timeout: float = 30.0,
         content_type: str = "application/json") -> Answer:
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", content_type)
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                 headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw, got = r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        status, raw, got = e.code, e.read(), dict(e.headers)
    text = raw.decode("utf-8", errors="replace")
    try:
        value: Any = json.loads(text) if text else None
    except ValueError:
        value = text
    return Answer(status, value, got, text)
