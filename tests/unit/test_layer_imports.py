"""DESIGN's may-import rules for every layer, as import-linter contracts.

The contracts live in pyproject.toml (``[tool.importlinter]``); this test runs
them so ``pytest`` (and so ``make test`` and CI) fails when a layer imports
what it may not, directly or through a chain of imports. ``lint_imports``
configures logging with ``disable_existing_loggers``: every logger it disabled
is enabled again afterwards, or later tests in the session would see no log
records at all.
"""

from __future__ import annotations

import logging
from pathlib import Path

from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]


def test_every_layer_keeps_its_import_rule() -> None:
    loggers = [lg for lg in logging.root.manager.loggerDict.values()
               if isinstance(lg, logging.Logger) and not lg.disabled]
    try:
        result = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True,
                              no_logo=True)
    finally:
        for lg in loggers:
            lg.disabled = False
    assert result == 0, "a may-import contract is broken (see stdout)"
