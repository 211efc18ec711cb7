"""Committed offsets per group: the in-memory image of the offset commit records.

``OffsetStore`` changes only through ``replay`` (a commit record or its
tombstone), whether the record was just written or is being loaded at
startup, so the live state and the replayed state cannot differ.
``commit_record``/``tombstone_record`` build the records; the coordinator
appends them to its ``Result`` and replays them at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from spool.coordinator.result import OutRecord
from spool.coordinator.schema import (
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
)


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


class OffsetStore:
    def __init__(self) -> None:
        self._groups: dict[str, dict[tuple[str, int], CommittedOffset]] = {}

    def replay(self, key: OffsetKey, value: OffsetValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            offsets = self._groups.get(key.group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self._groups[key.group]
            return
        self._groups.setdefault(key.group, {})[tp] = CommittedOffset(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp
        )

    def get(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        return self._groups.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return bool(self._groups.get(group))

    def drop(self, group: str) -> None:
        """Forget ``group``'s offsets (its partition moved to another coordinator)."""
        self._groups.pop(group, None)

    def groups(self) -> list[str]:
        return list(self._groups)

    @staticmethod
    def commit_record(
        group: str, topic: str, partition: int, committed: CommittedOffset
    ) -> tuple[OutRecord, OffsetKey, OffsetValue]:
        key = OffsetKey(group, topic, partition)
        value = OffsetValue(
            committed.offset, committed.leader_epoch, committed.metadata, committed.commit_timestamp
        )
        return OutRecord(group, encode_offset_key(key), encode_offset_value(value)), key, value

    @staticmethod
    def tombstone_record(group: str, topic: str, partition: int) -> tuple[OutRecord, OffsetKey]:
        key = OffsetKey(group, topic, partition)
        return OutRecord(group, encode_offset_key(key), None), key
