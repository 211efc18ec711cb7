"""Child process for the high watermark checkpoint crash test: move HWs until killed.

    python hw_checkpoint_writer.py LOG_DIR SEED

Opens three partitions through a LogManager with ``hw_follows_leo=False`` (a
replica: each opens at min(replication-offset-checkpoint, LEO)), prints the
HWs it opened with (``open topic partition hw``), then forever: appends to a
random partition, raises its HW to a random offset up to the LEO, and
sometimes checkpoints the high watermarks (``LogManager.checkpoint``). After
each checkpoint returns it prints ``hw topic partition hw`` for every
partition and flushes stdout: those values are on disk. The background
thread runs too (its own HW checkpoints every 10 ms). The parent kills it
with SIGKILL at a random time.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from spool.storage.manager import LogManager  # noqa: E402
from tests.helpers.storage_batches import make_batch  # noqa: E402

PARTITIONS = 3


def main() -> None:
    log_dir, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    mgr = LogManager([log_dir], {"replica.high.watermark.checkpoint.interval.ms": "10"},
                     hw_follows_leo=False)
    logs = [mgr.get("hw", p) or mgr.create_partition("hw", p) for p in range(PARTITIONS)]
    out = sys.stdout
    for p, log in enumerate(logs):
        out.write(f"open hw {p} {log.high_watermark}\n")
    out.flush()
    mgr.start_background(0.01)
    i = 0
    while True:
        p = rng.randrange(PARTITIONS)
        log = logs[p]
        log.append(make_batch(rng.randint(1, 5), value_size=rng.choice((10, 300)),
                              tag=seed * 1_000_000 + i))
        log.update_high_watermark(rng.randint(log.high_watermark, log.log_end_offset))
        if rng.random() < 0.3:
            mgr.checkpoint(recovery_points=False, log_starts=False)
            hws = [lg.high_watermark for lg in logs]  # collected before the write, or later
            out.write("".join(f"hw hw {q} {hw}\n" for q, hw in enumerate(hws)))
            out.flush()
        i += 1


if __name__ == "__main__":
    main()
