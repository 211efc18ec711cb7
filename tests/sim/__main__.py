"""Run or replay simulation seeds.

    python -m tests.sim --seed N -v        # replay one seed, tracing every event
    python -m tests.sim --seeds 0:10000    # a range of seeds; prints failures and a summary
    python -m tests.sim --seeds 0:20 --disk /dev/shm/sim   # on DiskRaftLog stores
    python -m tests.sim --controller --seed N -v           # with the QuorumController
    python -m tests.sim --replication --seed N -v          # partition replication
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import traceback
from pathlib import Path

from tests.sim.controller_sim import ControllerSimulation
from tests.sim.replication_sim import ReplicationSimulation
from tests.sim.sim import Simulation


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.sim")
    ap.add_argument("--seed", type=int, help="one seed")
    ap.add_argument("--seeds", default="0:100", help="a range START:STOP")
    ap.add_argument("-v", "--verbose", action="store_true", help="trace every event")
    ap.add_argument("--disk", type=Path, help="run on DiskRaftLog stores under this dir")
    ap.add_argument("--controller", action="store_true",
                    help="with a QuorumController on every node (controller_sim.py)")
    ap.add_argument("--replication", action="store_true",
                    help="partition replication: brokers with Partitions (replication_sim.py)")
    args = ap.parse_args(argv)
    if args.seed is not None:
        seeds = range(args.seed, args.seed + 1)
    else:
        start, stop = (int(x) for x in args.seeds.split(":"))
        seeds = range(start, stop)
    trace = print if args.verbose else None
    if args.replication:
        return _replication(seeds, trace)
    failed = 0
    t0 = time.process_time()
    steps = 0
    totals: dict[str, int] = {}
    recovery: list[int] = []
    leader: list[int] = []
    for seed in seeds:
        try:
            store_dir = None
            if args.disk is not None:
                store_dir = args.disk / f"seed-{seed}"
                shutil.rmtree(store_dir, ignore_errors=True)
            kind = ControllerSimulation if args.controller else Simulation
            sim = kind(seed, trace=trace, store_dir=store_dir)
            if args.verbose:
                print(f"seed {seed}: {sim.p}")
            try:
                sim.run()
            finally:
                sim.close()
            steps += sim.steps
            recovery.append(sim.recovery_ms)
            leader.append(sim.leader_ms)
            totals["committed"] = totals.get("committed", 0) + len(sim.committed)
            for k, v in sim.stats.items():
                totals[k] = totals.get(k, 0) + v
        except Exception:
            failed += 1
            print(f"seed {seed} FAILED (replay: python -m tests.sim --seed {seed} -v)")
            traceback.print_exc(limit=3)
    cpu = time.process_time() - t0
    print(f"{len(seeds)} seeds, {failed} failed, {steps} steps, {cpu:.1f} s CPU "
          f"({1000 * cpu / max(1, len(seeds)):.1f} ms/seed)")
    print("totals: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    for what, ms in (("a leader every voter follows", leader),
                     ("an append committed on every voter", recovery)):
        if ms:
            ms.sort()
            p50, p99 = (ms[min(len(ms) - 1, len(ms) * p // 100)] for p in (50, 99))
            print(f"calm to {what}: p50 {p50}, p99 {p99}, max {ms[-1]} simulated ms "
                  f"(election timeout 50)")
    return 1 if failed else 0


def _replication(seeds: range, trace) -> int:
    failed = steps = 0
    totals: dict[str, int] = {}
    recovery: list[int] = []
    t0 = time.process_time()
    for seed in seeds:
        sim = ReplicationSimulation(seed, trace=trace)
        if trace:
            print(f"seed {seed}: {sim.p}")
        try:
            sim.run()
        except Exception:
            failed += 1
            print(f"seed {seed} FAILED (replay: python -m tests.sim --replication --seed {seed} -v)")
            traceback.print_exc(limit=-3)
        else:
            recovery.append(sim.recovery_ms)
        steps += sim.steps
        for k, v in sim.stats.items():
            totals[k] = totals.get(k, 0) + v
    cpu = time.process_time() - t0
    print(f"{len(seeds)} seeds, {failed} failed, {steps} steps, {cpu:.1f} s CPU "
          f"({1000 * cpu / max(1, len(seeds)):.1f} ms/seed)")
    print("totals: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    if recovery:
        recovery.sort()
        p50, p99 = (recovery[min(len(recovery) - 1, len(recovery) * p // 100)] for p in (50, 99))
        print(f"calm to an acks=all append acknowledged and every replica in sync: p50 {p50}, "
              f"p99 {p99}, max {recovery[-1]} simulated ms")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
