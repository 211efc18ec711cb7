"""DESIGN's may-import rules for every layer, as import-linter contracts.

The contracts live in pyproject.toml (``[tool.importlinter]``); this test runs
them so ``pytest`` (and so ``make test`` and CI) fails when a layer imports
what it may not, directly or through a chain of imports.
"""

from __future__ import annotations

from pathlib import Path

from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]


def test_every_layer_keeps_its_import_rule() -> None:
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True,
                        no_logo=True) == 0, "a may-import contract is broken (see stdout)"
