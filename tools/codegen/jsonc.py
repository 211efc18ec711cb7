"""Parse Kafka's message specs: JSON with ``//`` line comments.

``strip_comments`` removes ``//`` comments outside string literals (a ``//``
inside a string, e.g. a URL in an ``about`` text, is kept) and preserves
newlines so JSON error positions still point at the right line.
"""

from __future__ import annotations

import json
from typing import Any


def strip_comments(text: str) -> str:
    out: list[str] = []
    i = 0
    n = len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == '\\' and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif c == '/' and text.startswith('//', i):
            end = text.find('\n', i)
            i = n if end < 0 else end
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def loads(text: str) -> Any:
    return json.loads(strip_comments(text))
