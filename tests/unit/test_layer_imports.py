"""DESIGN's may-import rules for every layer, as import-linter contracts.

The contracts live in pyproject.toml (``[tool.importlinter]``); this test runs
them so ``pytest`` (and so ``make test`` and CI) fails when a layer imports
what it may not, directly or through a chain of imports. It runs them in a
child process: import-linter configures logging (dictConfig, which disables
every existing logger) in the process that calls it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
)


def test_every_layer_keeps_its_import_rule() -> None:
    proc = subprocess.run([sys.executable, "-c", LINT, str(ROOT / "pyproject.toml")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
