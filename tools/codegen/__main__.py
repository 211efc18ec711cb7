"""CLI: ``python -m tools.codegen [--check] [--out DIR]``.

Without ``--check`` it (re)writes ``spool/protocol/_generated`` and deletes
stale ``.py`` files there. With ``--check`` it regenerates in memory, lists
every file that differs, is missing or is extra, and exits 1 if any; 0 when
the committed output is identical.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.codegen.emit_module import render_module, render_registry
from tools.codegen.schema import load_specs

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / 'spool' / 'protocol' / '_generated'


def generate() -> dict[str, str]:
    """File name -> source text of the whole generated package."""
    specs = load_specs()
    files = dict(render_module(spec) for spec in specs)
    files['__init__.py'] = render_registry(specs)
    return dict(sorted(files.items()))


def check(out_dir: Path, files: dict[str, str]) -> list[str]:
    problems = []
    existing = {p.name for p in out_dir.glob('*.py')} if out_dir.is_dir() else set()
    for name, text in files.items():
        path = out_dir / name
        if name not in existing:
            problems.append(f'missing: {path}')
        elif path.read_text(encoding='utf-8') != text:
            problems.append(f'differs: {path}')
    problems.extend(f'extra: {out_dir / name}' for name in sorted(existing - set(files)))
    return problems


def write(out_dir: Path, files: dict[str, str]) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    changed = 0
    for stale in sorted({p.name for p in out_dir.glob('*.py')} - set(files)):
        (out_dir / stale).unlink()
        changed += 1
    for name, text in files.items():
        path = out_dir / name
        if not path.exists() or path.read_text(encoding='utf-8') != text:
            path.write_text(text, encoding='utf-8')
            changed += 1
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m tools.codegen', description=__doc__)
    parser.add_argument('--check', action='store_true',
                        help='compare with the files on disk; exit 1 on any difference')
    parser.add_argument('--out', type=Path, default=DEFAULT_OUT, help='output directory')
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        problems = check(args.out, files)
        for line in problems:
            print(line)
        if problems:
            print(f'{len(problems)} generated file(s) out of date: run python -m tools.codegen')
            return 1
        print(f'{len(files)} generated files up to date')
        return 0
    changed = write(args.out, files)
    print(f'wrote {len(files)} files to {args.out} ({changed} changed)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
