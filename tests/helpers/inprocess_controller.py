"""The real QuorumController where a controller listener would be, for broker-side tests.

``InProcessController(loader)`` answers what a ``ControllerChannel`` sends it
(``NodeClient``'s ``request(message, version, timeout_ms=...)``) through
``spool.cluster.controller_apis`` and the controller's own calls, and commits
each answer's records at once: replayed into the controller and handed to
``loader`` (a ``MetadataLoader``) as committed ``LogEntry``s, one offset each.
No quorum, no sockets: what the broker side does with the answers is what is
under test.
"""

from __future__ import annotations

from spool.cluster import controller_apis
from spool.cluster.controller import QuorumController
from spool.cluster.ops import ControllerResult
from spool.cluster.raft.store import LogEntry
from spool.protocol.metadata_records import encode_record

NOW = 1_000


class InProcessController:
    def __init__(self, loader, cluster_id: str = "c1") -> None:
        self.c = QuorumController(cluster_id=cluster_id)
        self.loader = loader
        self.next_offset = 0
        self.requests: list[str] = []
        self.commit(self.c.activate(NOW).records)

    def commit(self, records) -> None:
        entries = []
        for r in records:
            self.c.replay(r, self.next_offset)
            entries.append(LogEntry(self.next_offset, 1, encode_record(r)))
            self.next_offset += 1
        if entries:
            self.loader.handle_commit(entries)

    async def request(self, req, version, *, timeout_ms=None):
        self.requests.append(type(req).__name__)
        api_key = req.API_KEY
        c = self.c
        res = {
            62: lambda: controller_apis.broker_registration(c, req, self.next_offset, NOW),
            63: lambda: controller_apis.broker_heartbeat(c, req, NOW),
            19: lambda: c.create_topics(req),
            20: lambda: controller_apis.delete_topics(c, req, version),
            37: lambda: c.create_partitions(req),
            33: lambda: c.alter_configs(req),
            44: lambda: c.incremental_alter_configs(req),
            67: lambda: controller_apis.allocate_producer_ids(c, req),
            43: lambda: c.elect_leaders(req),
            45: lambda: c.alter_partition_reassignments(req),
            46: lambda: ControllerResult([], c.list_partition_reassignments(req)),
        }[api_key]()
        self.commit(res.records)
        return res.reply

    async def close(self) -> None:
        pass
