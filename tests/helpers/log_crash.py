"""``crash(log)``: what kill -9 leaves of a ``PartitionLog``, in-process.

The files stay as they are: indexes not trimmed, nothing flushed or checkpointed, no clean
shutdown marker; the segments' descriptors are closed so the directory can be opened again.
"""

from __future__ import annotations

from spool.storage.log import PartitionLog


def crash(log: PartitionLog) -> None:
    for seg in log.segments:
        for idx in (seg._offset_index, seg._time_index):
            if idx is not None:
                idx.discard()
        seg.close_file()
