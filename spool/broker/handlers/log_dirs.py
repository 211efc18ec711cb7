"""DescribeLogDirs (35): this broker's log dirs, the partitions each holds, their sizes.

Served at v1-5 (Kafka 4 dropped v0), as Kafka's ``ReplicaManager.describeLogDirs``:

- one result per dir of ``log.dirs``, named by its absolute path, listed even when it
  holds none of the partitions asked for (``topics`` empty);
- ``topics`` null asks for every partition this broker holds a replica of, leader or
  follower; otherwise only the listed ones (a partition not held here is left out,
  no error);
- per partition: ``partition_size`` the bytes of its segment files (``.log``);
  ``offset_lag`` = max(high watermark - log end offset, 0) with the high watermark this
  replica knows (Kafka's formula: a leader's is always 0, a follower's counts what
  it knows the leader has committed and it has not fetched yet); ``is_future_key``
  false (no AlterReplicaLogDirs, so no future logs);
- v4+: ``total_bytes`` / ``usable_bytes`` of the volume holding the dir
  (``statvfs``: blocks and blocks available to unprivileged users, times the fragment
  size, as Java's ``FileStore.getTotalSpace``/``getUsableSpace``); v5 ``is_cordoned``
  false (no cordoning);
- a dir that cannot be read (``statvfs`` fails: the disk is gone) is
  KAFKA_STORAGE_ERROR with no topics, as Kafka answers for an offline dir.

The metadata log (``__cluster_metadata-0``) and the broker's local metadata store are
not partitions of a topic and are not listed (Kafka's ``allLogs`` excludes the Raft
log too). Everything comes from memory but one ``statvfs`` per dir.

Authorization (Kafka's): DESCRIBE on the cluster; refused, the answer is
CLUSTER_AUTHORIZATION_FAILED at the top level (v3+; older versions have no place for it)
with no results.
"""

from __future__ import annotations

import os
from collections import defaultdict

from spool.broker.admin_authz import cluster_allowed
from spool.broker.registry import handles
from spool.protocol._generated import DescribeLogDirsRequest, DescribeLogDirsResponse
from spool.protocol._generated.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors


def volume_bytes(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path`` (OSError if unreadable)."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def offset_lag(plog) -> int:
    """Kafka's ``getLogEndOffsetLag`` for a current (not future) log."""
    return max(plog.high_watermark - plog.log_end_offset, 0)


@handles(35, 1, 5)
async def describe_log_dirs(ctx, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    broker = ctx.broker
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(throttle_time_ms=0,
                                       error_code=Errors.CLUSTER_AUTHORIZATION_FAILED, results=[])
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[DescribeLogDirsPartition]]] = defaultdict(
        lambda: defaultdict(list))
    for (topic, partition), plog in sorted(broker.logs.logs().items()):
        if wanted is not None and (topic, partition) not in wanted:
            continue
        by_dir[os.path.abspath(plog.dir.parent)][topic].append(DescribeLogDirsPartition(
            partition_index=partition, partition_size=plog.size_in_bytes,
            offset_lag=offset_lag(plog), is_future_key=False))
    results = []
    for d in dict.fromkeys(os.path.abspath(d) for d in broker.config.log_dirs):
        try:
            total, usable = volume_bytes(d)
        except OSError:
            results.append(DescribeLogDirsResult(error_code=Errors.KAFKA_STORAGE_ERROR,
                                                 log_dir=d, topics=[]))
            continue
        topics = [DescribeLogDirsTopic(name=name, partitions=parts)
                  for name, parts in by_dir.get(d, {}).items()]
        results.append(DescribeLogDirsResult(error_code=0, log_dir=d, topics=topics,
                                             total_bytes=total, usable_bytes=usable,
                                             is_cordoned=False))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
