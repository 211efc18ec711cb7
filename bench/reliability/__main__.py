"""Run every reliability script in turn, then write docs/RELIABILITY.md (``make soak``).

    python -m bench.reliability [--quick] [--only fuzz,kill9] [--out DIR] [--doc PATH]

Each script runs in its own process with full counts (``--quick``: CI
sizes), one after the other (they share the machine's cores); a script
whose invariants fail does not stop the others. The report is written from
whatever results are in ``--out`` (``docs/reliability`` by default);
``failover`` (kill -9 of the cluster's controller) also writes
docs/CLUSTER-FAILOVER.md, ``replication`` (kill -9 of partition leaders under
acks=all) docs/REPLICATION-FAILOVER.md. Exits non-zero when any script did.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from bench.reliability import report
from bench.reliability.common import DEFAULT_OUT, REPO

SCRIPTS = ("fuzz", "idle", "partitions", "diskfull", "kill9", "failover", "replication")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(SCRIPTS))
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--doc", type=Path, default=report.DEFAULT_DOC)
    args = ap.parse_args(argv)
    failed = []
    for name in args.only.split(","):
        cmd = [sys.executable, "-m", f"bench.reliability.{name}"]
        if args.out != DEFAULT_OUT:
            cmd += ["--out", str(args.out)]
        if args.quick:
            cmd.append("--quick")
        print(f"== {' '.join(cmd[1:])}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.run(cmd, cwd=REPO).returncode
        print(f"== {name}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    report.write(args.out, args.doc)
    print(f"wrote {args.doc}; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
