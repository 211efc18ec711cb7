"""What the console shows, as plain data: the answers of ``spool.console.cluster`` and
the failures it raises (``NotFound`` -> 404, ``BadInput`` -> 400, ``Unavailable`` -> 503).

Kafka's words: ``log_start_offset``, ``high_watermark``, ``isr``; offsets and lag are
record counts, sizes bytes, timestamps epoch milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class NotFound(Exception):
    """The topic, partition or group asked for does not exist."""


class BadInput(Exception):
    """A request the console cannot honour as asked (the message says why)."""


class Unavailable(Exception):
    """No broker answered in time."""



@dataclass
class Node:
    id: int
    host: str
    port: int
    rack: str | None
    leaders: int = 0  # partitions this node leads
    replicas: int = 0  # partition replicas it holds


@dataclass
class Overview:
    cluster_id: str
    controller_id: int | None
    nodes: list[Node]
    topics: int
    partitions: int
    groups: int


@dataclass
class TopicSummary:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    records: int  # sum over partitions of high_watermark - log_start_offset


@dataclass
class PartitionInfo:
    id: int
    leader: int | None
    replicas: list[int]
    isr: list[int]
    log_start_offset: int
    high_watermark: int
    size_bytes: int | None  # None: DescribeLogDirs did not answer for it


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: str
    is_default: bool
    sensitive: bool


@dataclass
class TopicDetail:
    name: str
    internal: bool
    partitions: list[PartitionInfo]
    configs: list[ConfigEntry]


@dataclass
class Message:
    partition: int
    offset: int
    timestamp_ms: int | None
    timestamp_type: str  # CreateTime, LogAppendTime or "" when the record has none
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass
class Browse:
    topic: str
    partition: int
    partitions: int
    log_start_offset: int
    high_watermark: int
    start: int  # the first offset asked for (after a timestamp lookup)
    messages: list[Message]


@dataclass
class GroupSummary:
    group_id: str
    state: str
    type: str
    members: int = 0


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: list[tuple[str, int]]


@dataclass
class LagRow:
    topic: str
    partition: int
    committed: int | None
    high_watermark: int | None  # None: the partition no longer exists
    lag: int | None
    member_id: str | None  # the member the partition is assigned to, if any


@dataclass
class GroupDetail:
    group_id: str
    state: str
    type: str
    protocol: str  # the assignor
    coordinator: int | None
    members: list[Member]
    lag: list[LagRow] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(r.lag for r in self.lag if r.lag is not None)
