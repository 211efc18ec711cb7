"""What every controller operation takes and returns: ``ControllerConfig``, ``ControllerResult``.

A controller write computes, from the current image, a ``ControllerResult``: the
metadata ``records`` to append (Kafka's record classes, in order; all in one batch
when ``atomic``) and the ``reply`` to send once they are committed. The caller
appends the records through Raft, replays them into the controller when they
commit, and only then sends the reply; if the append fails (leadership lost), it
answers NOT_CONTROLLER instead and nothing happened. A result without records still
waits for nothing and may be answered at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from spool.storage.config import broker_setting

T = TypeVar("T")

# metadata.version written by a new cluster's first controller: 3.6-IV2, the last level
# before directory assignment (KIP-858) and eligible leader replicas (KIP-966), which
# Spool does not implement; BrokerRegistrationChangeRecord v1 (controlled shutdown) is in.
METADATA_VERSION_FEATURE = "metadata.version"
METADATA_VERSION_LEVEL = 14


@dataclass(frozen=True)
class ControllerResult(Generic[T]):
    """Records to append (then replay) and the reply to send after they commit."""

    records: list[Any]
    reply: T
    atomic: bool = True


@dataclass(frozen=True)
class ControllerConfig:
    """The controller's settings, by Kafka's config names.

    ``static_props`` are the node's own properties (for the effective topic configs a
    CreateTopics answer lists and for ``unclean.leader.election.enable``).
    """

    num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    broker_session_timeout_ms: int = 9000  # broker.session.timeout.ms
    delete_topic_enable: bool = True  # delete.topic.enable
    producer_id_block_size: int = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
    metadata_version: int = METADATA_VERSION_LEVEL
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds
    unclean_leader_election_interval_ms: int = 300_000  # unclean.leader.election.interval.ms
    static_props: Mapping[str, Any] = field(default_factory=dict)
    # records `spool storage format` left (``spool.cluster.bootstrap``): SCRAM credentials
    bootstrap_records: tuple[Any, ...] = ()

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> ControllerConfig:
        """From a node's properties by Kafka's names (typed values or strings; absent keys
        take Kafka's defaults). INVALID_CONFIG for a value a key refuses."""
        return cls(
            num_partitions=broker_setting("num.partitions", props),
            default_replication_factor=broker_setting("default.replication.factor", props),
            delete_topic_enable=broker_setting("delete.topic.enable", props),
            broker_session_timeout_ms=int(props.get("broker.session.timeout.ms", 9000)),
            auto_leader_rebalance_enable=str(props.get("auto.leader.rebalance.enable",
                                                       "true")).lower() == "true",
            leader_imbalance_check_interval_ms=1000 * int(
                props.get("leader.imbalance.check.interval.seconds", 300)),
            unclean_leader_election_interval_ms=int(
                props.get("unclean.leader.election.interval.ms", 300_000)),
            static_props=dict(props),
        )


@dataclass(frozen=True)
class BrokerRegistrationReply:
    """What BrokerRegistration answers: the broker's epoch."""

    broker_epoch: int


@dataclass(frozen=True)
class BrokerHeartbeatReply:
    """What BrokerHeartbeat answers (its response's fields, by Kafka's names)."""

    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool
    in_controlled_shutdown: bool = False


@dataclass(frozen=True)
class ProducerIdsBlock:
    """AllocateProducerIds' answer: ids [first_producer_id, first + size) for the broker."""

    assigned_broker_id: int
    first_producer_id: int
    size: int
