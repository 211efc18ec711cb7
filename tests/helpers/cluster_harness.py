"""A controller driven as the broker process will drive it: each write's records are
"appended" at the next offsets and replayed once "committed" (no Raft: one node)."""

from __future__ import annotations

import random
import uuid
from typing import Any

from spool.cluster.controller import QuorumController
from spool.cluster.image import Endpoint
from spool.cluster.ops import ControllerConfig, ControllerResult
from spool.protocol._generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
MV = ("metadata.version", 1, 14)


class Harness:
    def __init__(self, config: ControllerConfig | None = None, seed: int = 0) -> None:
        self.controller = QuorumController(config, cluster_id=CLUSTER_ID,
                                           rng=random.Random(seed))
        self.log: list[tuple[int, Any]] = []
        self.now = 1_000_000
        self.incarnations: dict[int, uuid.UUID] = {}
        self.epochs: dict[int, int] = {}
        self.commit(self.controller.activate(self.now))

    @property
    def image(self):
        return self.controller.image

    @property
    def next_offset(self) -> int:
        return len(self.log)

    def commit(self, result: ControllerResult) -> Any:
        for rec in result.records:
            offset = len(self.log)
            self.log.append((offset, rec))
            self.controller.replay(rec, offset)
        return result.reply

    def register(self, broker_id: int, rack: str | None = None, *, new: bool = False) -> int:
        if new or broker_id not in self.incarnations:
            self.incarnations[broker_id] = uuid.UUID(int=random.Random(
                broker_id * 1000 + len(self.log)).getrandbits(128), version=4)
        reply = self.commit(self.controller.register_broker(
            broker_id=broker_id, cluster_id=CLUSTER_ID,
            incarnation_id=self.incarnations[broker_id],
            listeners=[Endpoint("PLAINTEXT", "127.0.0.1", 9092 + broker_id, 0)],
            rack=rack, features=[MV], next_offset=self.next_offset, now_ms=self.now))
        self.epochs[broker_id] = reply.broker_epoch
        return reply.broker_epoch

    def heartbeat(self, broker_id: int, *, want_fence: bool = False,
                  want_shutdown: bool = False, offset: int | None = None):
        return self.commit(self.controller.heartbeat(
            broker_id=broker_id, broker_epoch=self.epochs[broker_id], want_fence=want_fence,
            want_shutdown=want_shutdown,
            current_metadata_offset=self.next_offset - 1 if offset is None else offset,
            now_ms=self.now))

    def start(self, broker_id: int, rack: str | None = None) -> None:
        """Register and heartbeat until unfenced."""
        self.register(broker_id, rack)
        reply = self.heartbeat(broker_id)
        assert not reply.is_fenced, reply

    def create_topic(self, name: str, partitions: int = -1, rf: int = -1, *,
                     assignments: dict[int, list[int]] | None = None,
                     configs: dict[str, str | None] | None = None, validate_only=False):
        topic = CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=rf,
            assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                         for i, b in (assignments or {}).items()],
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        req = CreateTopicsRequest(topics=[topic], timeout_ms=1000, validate_only=validate_only)
        return self.commit(self.controller.create_topics(req)).topics[0]
