"""The record values of ``spool perf produce``, as Kafka's ProducerPerformance makes them.

Contract:

- ``--record-size B``: B random upper-case letters per record (seeded: every run sends
  the same values). Kafka draws fresh letters for every record; drawing them in Python
  would cost more than sending them, so a run walks a block of up to 16 MiB of such
  letters a record's length at a time: no two records within a batch (nor within any
  compressor's window) repeat each other, so compression sees Kafka's kind of data.
- ``--payload-file F``: the file's UTF-8 text split at the delimiter (trailing empty
  pieces dropped, as Java's ``String.split``); each record one of the pieces at random
  (seeded). An unreadable file is one line (exit 1), an empty one exit 2.
- ``--payload-monotonic``: the record's number (0, 1, ...) as text.
"""

from __future__ import annotations

import random
from pathlib import Path

from spool.cli.common import CliError

_BLOCK_MAX = 16 * 1024 * 1024


class Payloads:
    """Record ``i``'s value for one of the three payload options (module docstring)."""

    def __init__(self, size: int | None, choices: list[bytes] | None, n: int) -> None:
        self.rng = random.Random(0)
        self.size, self.choices = size, choices
        self.block = b""
        if size is not None:
            length = min(_BLOCK_MAX, size * n) + size
            letters = bytes(65 + i % 26 for i in range(256))
            self.block = self.rng.randbytes(length).translate(letters)
            self.span = length - size + 1

    def value(self, i: int) -> bytes:
        if self.size is not None:
            off = (i * self.size) % self.span
            return self.block[off:off + self.size]
        if self.choices is not None:
            return self.choices[self.rng.randrange(len(self.choices))]
        return str(i).encode()


def read_payload_file(path: str, delimiter: str) -> list[bytes]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read payload file {path}: "
                       f"{getattr(e, 'strerror', None) or e}") from None
    payloads = text.split(delimiter)
    while payloads and payloads[-1] == "":  # Java's split drops trailing empty strings
        payloads.pop()
    if not payloads:
        raise CliError(f"payload file {path} is empty", 2)
    return [p.encode() for p in payloads]
