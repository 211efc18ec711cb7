"""docs/COMPATIBILITY.md is what ``python -m tools.compat_table`` gives now, and its Kafka
4.2 column is kio 0.6.5's."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import kio.schema as kio_schema

from tools.compat_table import render, rows
from tools.compat_table.__main__ import DEFAULT_OUT
from tools.compat_table.kafka42 import KAFKA_42


def test_committed_page_is_current():
    assert DEFAULT_OUT.read_text(encoding="utf-8") == render(), (
        "docs/COMPATIBILITY.md is stale: run python -m tools.compat_table")


def test_every_served_api_has_notes():
    missing = [(key, name) for key, name, _, broker, controller, notes in rows()
               if (broker != "-" or controller != "-") and not notes]
    assert not missing, f"add these to tools/compat_table/notes.py: {missing}"


def test_kafka_column_is_kio():
    found: dict[int, tuple[str, int, int]] = {}
    for mod in pkgutil.iter_modules(kio_schema.__path__):
        root = Path(kio_schema.__path__[0]) / mod.name
        versions = sorted(int(d.name[1:]) for d in root.glob("v*") if (d / "request.py").exists())
        if not versions:
            continue
        m = importlib.import_module(f"kio.schema.{mod.name}.v{versions[-1]}.request")
        cls = next(getattr(m, n) for n in dir(m)
                   if n.endswith("Request") and hasattr(getattr(m, n), "__api_key__"))
        found[int(cls.__api_key__)] = (cls.__name__.removesuffix("Request"), versions[0],
                                       versions[-1])
    assert found == KAFKA_42
