"""DESIGN's may-import rule for the records layer: only protocol errors/primitives from spool."""

from __future__ import annotations

import ast
from pathlib import Path

import spool.records

ALLOWED = ("spool.records", "spool.protocol.errors", "spool.protocol.primitives")


def test_records_imports_only_protocol_primitives() -> None:
    root = Path(spool.records.__file__).parent
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "spool" or name.startswith("spool."):
                    assert name.startswith(ALLOWED), f"{path.name} imports {name}"
