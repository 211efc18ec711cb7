"""The process's log output: a level per logger, text or JSON lines on stderr.

Levels are one spec, the same for ``spool broker --log-level`` and the broker key
``log.level`` (the flag wins): a level for everything, then ``logger=LEVEL`` pairs
for loggers (and their children) that should say more or less::

    INFO                                   the default
    INFO,spool.storage=DEBUG               the storage layer in detail
    WARNING,spool.coordinator=INFO         quiet, but group events

Levels are DEBUG, INFO, WARNING, ERROR (any case). ``parse_levels`` raises
``ValueError`` with the part it could not read.

Formats (``--log-format``): ``text`` (``2026-11-27 01:46:26,200 INFO spool.broker:
message``) or ``json``, one object per line::

    {"ts": "2026-11-27T01:46:26.200Z", "level": "INFO", "logger": "spool.storage.log",
     "message": "orders-0: rolled a new segment at offset 1234", "fields": {...}}

``fields`` holds the values an event line passes with ``extra=fields(topic=...,
partition=...)``, plus ``exception`` (the traceback) when there is one; it is ``{}``
for lines that pass none. Event lines are rare (topic created, segment rolled, group
rebalanced...): nothing here runs per request.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def fields(**values: Any) -> dict[str, Any]:
    """``extra=`` for a logging call: structured values the JSON format reports."""
    return {"fields": values}


def _level(word: str, part: str) -> str:
    level = word.strip().upper()
    if level not in LEVELS:
        raise ValueError(f"{part!r}: the level must be one of {', '.join(LEVELS)}")
    return level


def parse_levels(spec: str) -> tuple[str, dict[str, str]]:
    """``"INFO,spool.storage=DEBUG"`` -> ``("INFO", {"spool.storage": "DEBUG"})``."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise ValueError("no level given (one of DEBUG, INFO, WARNING, ERROR)")
    root, loggers = "INFO", {}
    for i, part in enumerate(parts):
        if "=" in part:
            name, _, word = part.partition("=")
            if not name.strip():
                raise ValueError(f"{part!r}: a logger name is missing before '='")
            loggers[name.strip()] = _level(word, part)
        elif i == 0:
            root = _level(part, part)
        else:
            raise ValueError(f"{part!r}: only the first part may be a bare level; "
                             "the others are logger=LEVEL")
    return root, loggers


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        ts = dt.datetime.fromtimestamp(record.created, dt.UTC)
        out: dict[str, Any] = {
            "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "fields": dict(getattr(record, "fields", None) or {}),
        }
        if record.exc_info:
            out["fields"]["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure(levels: str = "INFO", fmt: str = "text") -> None:
    """Send the process's logs to stderr at ``levels`` (a spec) in ``fmt``; may be called
    again (the broker command first logs config warnings, then applies ``log.level``)."""
    root_level, loggers = parse_levels(levels)
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: expected one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(root_level)
    for name, level in loggers.items():
        logging.getLogger(name).setLevel(level)
