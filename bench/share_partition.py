"""Share-partition bookkeeping cost: ``python -m bench.share_partition`` (a measurement).

``spool.share.partition.SharePartition`` alone (no log, no network): 100,000 records in
batches of 500 acquired and acknowledged, best of several rounds, total ms and µs per
record, for:

* one consumer: fetch one batch, ACCEPT it with one type;
* four consumers taking turns, each fetching 2 batches, ACCEPTing with one type per
  offset (what librdkafka sends), acknowledging in reverse order of fetching;
* four consumers, every 10th record RELEASEd and fetched again (ranges split per offset),
  with ``take_changes()`` after every acknowledgement (the ShareUpdate a broker writes).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from spool.share.partition import ACCEPT, RELEASE, AckBatch, SharePartition

RECORDS = 100_000
BATCH = 500
MEMBERS = ("m1", "m2", "m3", "m4")


def _log(n: int = RECORDS, size: int = BATCH) -> list[tuple[int, int]]:
    return [(b, b + size - 1) for b in range(0, n, size)]


def one_consumer() -> None:
    sp = SharePartition(0)
    for first, last in _log():
        got = sp.acquire("m1", [(first, last)], BATCH, 0, fetch_offset=sp.next_fetch_offset())
        sp.acknowledge("m1", [AckBatch(a.first_offset, a.last_offset, (ACCEPT,)) for a in got])
    assert sp.start_offset == RECORDS, sp.start_offset


def four_consumers_per_offset_acks() -> None:
    sp = SharePartition(0, max_in_flight=10_000)
    log = _log()
    i = 0
    held: dict[str, list] = {m: [] for m in MEMBERS}
    while sp.start_offset < RECORDS:
        for m in MEMBERS:
            off = sp.next_fetch_offset()
            batches = [b for b in log[off // BATCH: off // BATCH + 2]]
            held[m] = sp.acquire(m, batches, 2 * BATCH, i, fetch_offset=off)
            i += 1
        for m in reversed(MEMBERS):
            sp.acknowledge(m, [AckBatch(a.first_offset, a.last_offset,
                                        (ACCEPT,) * (a.last_offset - a.first_offset + 1))
                               for a in held[m]])


def four_consumers_with_releases() -> None:
    sp = SharePartition(0, max_in_flight=10_000)
    log = _log()
    while sp.start_offset < RECORDS:
        held = {}
        for m in MEMBERS:
            off = sp.next_fetch_offset()
            first = off // BATCH
            held[m] = sp.acquire(m, log[first:first + 2], BATCH, 0, fetch_offset=off)
        for m in MEMBERS:
            for a in held[m]:
                types = tuple(RELEASE if (o % 10 == 0 and a.delivery_count == 1) else ACCEPT
                              for o in range(a.first_offset, a.last_offset + 1))
                sp.acknowledge(m, [AckBatch(a.first_offset, a.last_offset, types)])
                sp.take_changes()


def _best(fn: Callable[[], None], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    for name, fn in (("one consumer, batch acks", one_consumer),
                     ("4 consumers, per-offset acks", four_consumers_per_offset_acks),
                     ("4 consumers, 10% released + take_changes", four_consumers_with_releases)):
        s = _best(fn, args.rounds)
        print(f"{name:44s} {s * 1e3:8.1f} ms  {s / RECORDS * 1e6:6.2f} µs/record")


if __name__ == "__main__":
    main()
