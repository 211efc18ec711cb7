"""CLI: ``python -m tools.compat_table [--check] [--out PATH]``.

Without ``--check`` it writes docs/COMPATIBILITY.md; with it, it exits 1 (saying so) when
the committed page differs from what the registry and the notes give now, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.compat_table import render

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "docs" / "COMPATIBILITY.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.compat_table", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed page; exit 1 on any difference")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date: run python -m tools.compat_table")
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
