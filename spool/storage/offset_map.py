"""The cleaner's key -> latest offset map over the dirty section of a log.

Kafka's ``SkimpyOffsetMap`` keeps a 16-byte MD5 of each key and an 8-byte
offset in a fixed buffer of ``log.cleaner.dedupe.buffer.size`` bytes filled
to ``log.cleaner.io.buffer.load.factor``. Here the keys themselves are the
dict keys (exact: no hash collisions), and the capacity is still counted as
Kafka counts it, ``buffer size // 24 * load factor`` entries, so the same
settings bound how much dirty log one cleaning covers. A Python dict entry
costs more than 24 bytes; the default buffer (128 MiB) admits ~5M keys.

``latest_offset`` is the last offset the map covers: a record above it is
kept by the cleaner whatever its key (it was not looked at).

Not thread-safe; one cleaning owns one map.
"""

from __future__ import annotations

BYTES_PER_ENTRY = 24  # Kafka's MD5 hash (16) + offset (8)


class OffsetMap:
    """key bytes -> the largest offset seen for that key (see the module docstring)."""

    __slots__ = ("_map", "capacity", "latest_offset")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("an offset map needs room for at least one key")
        self._map: dict[bytes, int] = {}
        self.capacity = capacity
        self.latest_offset = -1

    @classmethod
    def for_buffer(cls, buffer_bytes: int, load_factor: float = 0.9) -> OffsetMap:
        return cls(max(1, int(buffer_bytes // BYTES_PER_ENTRY * load_factor)))

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` for ``key`` (offsets arrive in increasing order)."""
        self._map[key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 if the map has not seen it."""
        return self._map.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1
