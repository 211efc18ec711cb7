"""Child process for the storage crash test: append batches until killed.

    python storage_crash_writer.py LOG_DIR SEED FLUSH_MESSAGES

Opens the log through a LogManager (so startup recovery runs here too),
starts the background thread (roll flushes, checkpoints, retention), and
appends batches of random size forever. After each ``append`` returns it
prints ``first_offset last_offset crc`` and flushes stdout: a printed line
is an acknowledged batch. The parent kills it with SIGKILL at a random time.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from spool.records.batch import BatchHeader  # noqa: E402
from spool.storage.manager import LogManager  # noqa: E402
from tests.helpers.storage_batches import make_batch  # noqa: E402


def main() -> None:
    log_dir, seed, flush_messages = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    props = {
        "log.index.interval.bytes": "4096",
        "log.index.size.max.bytes": str(64 * 1024),
        "log.flush.interval.messages": flush_messages,
        "log.retention.check.interval.ms": "100",
        "log.flush.offset.checkpoint.interval.ms": "50",
    }
    mgr = LogManager([log_dir], props)
    log = mgr.create_partition("crash", 0, {"internal.segment.bytes": str(256 * 1024)})
    mgr.start_background(0.02)
    out = sys.stdout
    i = 0
    while True:
        n = rng.randint(1, 20)
        size = rng.choice((10, 100, 1000, 20_000, 120_000))
        now = mgr.clock.now_ms()
        batch = make_batch(n, timestamp=now, value_size=size // n, tag=seed * 1_000_000 + i)
        info = log.append(batch)
        crc = BatchHeader.parse(batch).crc
        out.write(f"{info.first_offset} {info.last_offset} {crc}\n")
        out.flush()
        i += 1


if __name__ == "__main__":
    main()
