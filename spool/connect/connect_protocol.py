"""Kafka Connect's group protocol payloads (``ConnectProtocol`` v0), byte for byte.

Protocol type ``connect``, protocol name ``default`` (eager). Strings are Kafka's
``STRING`` (int16 length, UTF-8), arrays ``int32`` count then items, big-endian.

Member metadata (JoinGroup's protocol metadata)::

    version int16 (0) | url STRING | config_offset int64

Assignment (SyncGroup's member assignment)::

    version int16 (0) | error int16 | leader STRING | leader_url STRING
    | config_offset int64 | [connector STRING | [task int32]]

A task id of -1 (``CONNECTOR_TASK``) stands for the connector instance itself. Error
``CONFIG_MISMATCH`` (1): the leader could not read the config topic up to the offset a
member had seen; members read to the end and rejoin. Newer versions are read as v0
(Kafka's rule: unknown trailing fields are ignored).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from spool.connect.herder import TaskId

CONNECT_PROTOCOL_TYPE = "connect"
EAGER = "default"
CONNECTOR_TASK = -1
NO_ERROR = 0
CONFIG_MISMATCH = 1


@dataclass(frozen=True)
class WorkerState:
    url: str
    config_offset: int


@dataclass
class ConnectAssignment:
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: list[str] = field(default_factory=list)
    tasks: list[TaskId] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.error != NO_ERROR


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> str:
        n = self.take(">h")
        if n < 0:
            raise ValueError("null string in Connect protocol payload")
        s = bytes(self.data[self.pos:self.pos + n]).decode()
        self.pos += n
        return s


def _version(r: _Reader) -> None:
    v = r.take(">h")
    if v < 0:
        raise ValueError(f"Unsupported subscription version: {v}")


def encode_metadata(state: WorkerState) -> bytes:
    return struct.pack(">h", 0) + _string(state.url) + struct.pack(">q", state.config_offset)


def decode_metadata(data: bytes) -> WorkerState:
    r = _Reader(data)
    _version(r)
    url = r.string()
    return WorkerState(url, r.take(">q"))


def encode_assignment(a: ConnectAssignment) -> bytes:
    by_connector: dict[str, list[int]] = {}
    for name in a.connectors:
        by_connector.setdefault(name, []).append(CONNECTOR_TASK)
    for t in a.tasks:
        by_connector.setdefault(t.connector, []).append(t.task)
    out = [struct.pack(">hh", 0, a.error), _string(a.leader), _string(a.leader_url),
           struct.pack(">qi", a.config_offset, len(by_connector))]
    for name, ids in by_connector.items():
        out.append(_string(name) + struct.pack(f">i{len(ids)}i", len(ids), *ids))
    return b"".join(out)


def decode_assignment(data: bytes) -> ConnectAssignment:
    r = _Reader(data)
    _version(r)
    a = ConnectAssignment(r.take(">h"), r.string(), r.string(), r.take(">q"))
    for _ in range(r.take(">i")):
        name = r.string()
        for _ in range(r.take(">i")):
            t = r.take(">i")
            if t == CONNECTOR_TASK:
                a.connectors.append(name)
            else:
                a.tasks.append(TaskId(name, t))
    return a
