"""Record positions and varints over a records block, for arrow_records' vectorized decode.

``walk(data, u8, u16, pos, end, count, out)`` finds where each of ``count``
records in ``data[pos:end]`` starts (RecordBatch v2: each record begins with
its length as a zigzag varint) and appends them to ``out`` as int64 arrays;
the records must fill the span exactly. This is the only per-record Python
of the decode: a run of records of one size r is recognised with one strided
numpy comparison instead (if the record at ``pos`` has size r and the length
varints at pos + r, pos + 2r, ... have the same bytes, all those records have
size r: exact, not a guess). Runs are probed 64 records at first, doubling
while they go on; when sizes vary, the Python walk takes 32, 64, ... 1024
records before the next probe.

``varints(u8, u16, pos, max_bytes)`` decodes the zigzag varints at the
(increasing) positions ``pos`` at once: one 16-bit load each from ``u16``
(``u16_view(u8)``: the word at every byte position, a strided view, no
copy) and two look-ups in 64 Ki-entry tables; varints of 3 bytes or more are
decoded apart. Malformed input raises ``KafkaError(CORRUPT_MESSAGE)``.
"""

from __future__ import annotations

import numpy as np

from spool.protocol.errors import Errors, KafkaError
from spool.records.varint import read_uvarint

Buffer = bytes | bytearray | memoryview


def corrupt(message: str) -> KafkaError:
    return KafkaError(Errors.CORRUPT_MESSAGE, message)


def _lookup_tables() -> tuple[np.ndarray, np.ndarray]:
    """Value and size of the varint starting with each 16-bit little-endian word.

    Size 0 marks a varint of 3 bytes or more (decoded the slow way).
    """
    w = np.arange(1 << 16, dtype=np.int64)
    b0, b1 = w & 0xFF, w >> 8
    one = b0 < 0x80
    two = ~one & (b1 < 0x80)
    z = np.where(one, b0, (b0 & 0x7F) | (b1 << 7))
    value = np.where(one | two, (z >> 1) ^ -(z & 1), 0)
    size = np.where(one, 1, np.where(two, 2, 0)).astype(np.int8)
    return value, size


_VALUE16, _SIZE16 = _lookup_tables()


def varints(
    u8: np.ndarray, u16: np.ndarray, pos: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at ``pos`` (increasing): (values as int64, sizes in bytes).

    One 16-bit load per varint and two table look-ups; varints of 3 bytes or more
    (rare: records of 8 KiB, timestamp deltas of 8 s) are decoded apart.
    """
    try:
        if len(pos) and pos[-1] >= len(u16):  # a varint in the last byte: no 16-bit load
            w = np.empty(len(pos), np.uint16)
            w[:-1] = u16[pos[:-1]]
            w[-1] = u8[pos[-1]] if pos[-1] < len(u8) else 0x80
        else:
            w = u16[pos]  # (take() would copy the whole strided view first)
    except IndexError:
        raise corrupt("record fields run past the records") from None
    value = _VALUE16.take(w)
    size = _SIZE16.take(w)
    if len(size) and size.min() == 0:
        idx = np.flatnonzero(size == 0)
        value[idx], size[idx] = varints_any(u8, pos[idx], max_bytes)
    return value, size


def varints_any(
    u8: np.ndarray, pos: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray | int]:
    """Zigzag varints of any size at ``pos``: (values as int64, sizes in bytes).

    The second byte is read for all records at once (common: value lengths from 64);
    later bytes only for the records that still continue.
    """
    b = u8.take(pos, mode="clip")
    more = b >= 0x80
    if not more.any():
        z = b.astype(np.int64)
        return (z >> 1) ^ -(z & 1), 1
    z = (b & 0x7F).astype(np.int64)
    b = u8.take(pos + 1, mode="clip")
    z |= (b & 0x7F).astype(np.int64) << 7 & -more.view(np.int8).astype(np.int64)
    size = 1 + more.view(np.int8).astype(np.int64)
    more &= b >= 0x80
    if more.any():
        idx = np.flatnonzero(more)
        at = pos[idx] + 1
        shift = 14
        for _ in range(2, max_bytes):
            at = at + 1
            b = u8.take(at, mode="clip")
            z[idx] |= (b & 0x7F).astype(np.int64) << shift
            size[idx] += 1
            more = b >= 0x80
            if not more.any():
                break
            idx, at = idx[more], at[more]
            shift += 7
        else:
            raise corrupt(f"varint longer than {max_bytes} bytes")
    return (z.view(np.uint64) >> np.uint64(1)).view(np.int64) ^ -(z & 1), size



_PYTHON_STEPS = 32  # records walked in Python after a short run before trying runs again
_PROBE = 64  # records of a run compared at first


def u16_view(u8: np.ndarray) -> np.ndarray:
    """The little-endian 16-bit word at every byte position (a strided view, no copy)."""
    return np.ndarray((max(len(u8) - 1, 0),), "<u2", u8, 0, (1,))


def walk(data: Buffer, u8: np.ndarray, u16: np.ndarray, pos: int, end: int, count: int,
          out: list[np.ndarray]) -> None:
    """Append the starts of the ``count`` records in ``data[pos:end]``; they must fill it."""
    done = 0
    python_steps = 0
    probe = _PROBE  # records compared at once; doubles while runs go on
    backoff = _PYTHON_STEPS  # records walked in Python after a short run; doubles
    singles: list[int] = []
    try:
        while done < count:
            if python_steps:
                k = min(python_steps, count - done)
                pos = walk_python(data, pos, k, singles)
                done += k
                python_steps = 0
                continue
            b0 = data[pos]
            if b0 < 0x80:
                length, view, word = b0, u8, b0
                r = 1
            else:
                b1 = data[pos + 1]
                if b1 >= 0x80:  # a record of 8 KiB or more: one step in Python
                    pos = walk_python(data, pos, 1, singles)
                    done += 1
                    continue
                length, view, word = (b0 & 0x7F) | (b1 << 7), u16, b0 | (b1 << 8)
                r = 2
            if length & 1:
                raise corrupt("negative record length")
            r += length >> 1
            k = min(count - done, (end - pos) // r, probe)
            if k < 4:
                python_steps = max(1, k)
                continue
            same = view[pos : pos + r * k : r] == word
            m = k if same.all() else int(same.argmin())
            if singles:
                out.append(np.array(singles, np.int64))
                singles = []
            out.append(np.arange(pos, pos + r * m, r, dtype=np.int64))
            pos += r * m
            done += m
            probe = min(probe * 2, 1 << 16) if m == k else _PROBE
            if m < 8:  # sizes vary: walk in Python, try runs again less and less often
                python_steps = backoff
                backoff = min(backoff * 2, 1024)
            else:
                backoff = _PYTHON_STEPS
    except IndexError:
        raise corrupt("record is truncated") from None
    if singles:
        out.append(np.array(singles, np.int64))
    if pos != end:
        raise corrupt(f"records end at {pos}, the batch at {end}")


def walk_python(data: Buffer, pos: int, count: int, out: list[int]) -> int:
    append = out.append
    for _ in range(count):
        append(pos)
        b = data[pos]
        if b < 0x80:
            n = b
            pos += 1
        else:
            c = data[pos + 1]
            if c < 0x80:
                n = (b & 0x7F) | (c << 7)
                pos += 2
            else:
                n, pos = read_uvarint(data, pos)
        if n & 1:
            raise corrupt("negative record length")
        pos += n >> 1
    return pos
