"""Which error codes a response may carry at each version, and Kafka's downgrades.

A new error code reaches a client only from the version of the API that
announced it ("Version 2 adds the support for new error code
PRODUCER_FENCED"): a client of an older version cannot tell what it means.
Handlers raise Kafka's newest code; ``downgrade`` rewrites a response for an
older version the way Kafka does, and it runs in one place, the broker's
response path (``spool.broker.dispatch``), only when ``needs_downgrade``
says the version can need it: one dict lookup and one comparison per
response otherwise.

``DOWNGRADES[api_key]``: ``Downgrade(code, since, fallback, source)``: below
version ``since`` every ``*error_code`` field holding ``code`` is answered
``fallback``. ``since=NEVER`` means the API never carries ``code`` (Kafka
answers ``fallback`` at every version). Each row names where Kafka does it.

``ERRORS[api_key]``: the codes Kafka documents or returns for the API (the
``*Response.java`` javadocs, the JSON specs' "Supported errors" and version
comments, and what KafkaApis and the coordinators answer), each with the
first version that may carry it. ``allowed(api_key, version)`` is that set at
a version, with NONE and UNKNOWN_SERVER_ERROR (any response may carry them);
None for an API not audited yet. The round-trip test
(tests/integration/test_api_roundtrip.py) checks every response of every
advertised version against it. Helpers raising an API's version add its new
codes here (and a ``Downgrade`` where Kafka maps one for older versions).
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

from spool.protocol.errors import BY_NAME
from spool.protocol.errors import Errors as E
from spool.protocol.message import Message

NEVER = 0x7FFF  # a ``since`` beyond every version: the code is always replaced

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
DELETE_TOPICS, INIT_PRODUCER_ID = 20, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28


class Downgrade(NamedTuple):
    code: int       # Kafka's newest code, what handlers raise
    since: int      # the first version whose clients know it
    fallback: int   # what Kafka answers below ``since``
    source: str     # where Kafka does it


_FENCED = E.PRODUCER_FENCED
_ABORTABLE = E.TRANSACTION_ABORTABLE

DOWNGRADES: dict[int, tuple[Downgrade, ...]] = {
    PRODUCE: (
        Downgrade(E.KAFKA_STORAGE_ERROR, 4, E.NOT_LEADER_OR_FOLLOWER,
                  "ProduceResponse (Kafka 1.0-2.7; retriable for v3 clients, KAFKA-9628 dropped "
                  "it, Spool keeps it)"),
        Downgrade(_ABORTABLE, 11, E.INVALID_TXN_STATE,
                  "KafkaApis.handleProduceRequest (genericError from v11) and "
                  "AddPartitionsToTxnManager (INVALID_TXN_STATE for older clients)"),
    ),
    FETCH: (
        Downgrade(E.KAFKA_STORAGE_ERROR, 6, E.NOT_LEADER_OR_FOLLOWER,
                  "KafkaApis.handleFetchRequest maybeDownConvertStorageError"),
    ),
    LIST_OFFSETS: (
        Downgrade(E.OFFSET_NOT_AVAILABLE, 5, E.LEADER_NOT_AVAILABLE,
                  "ReplicaManager.fetchOffset (v5 adds OFFSET_NOT_AVAILABLE)"),
    ),
    OFFSET_COMMIT: (
        Downgrade(E.GROUP_ID_NOT_FOUND, 9, E.ILLEGAL_GENERATION,
                  "OffsetMetadataManager.validateOffsetCommit (unknown group with a generation)"),
    ),
    DELETE_TOPICS: (
        Downgrade(E.TOPIC_DELETION_DISABLED, 3, E.INVALID_REQUEST,
                  "KafkaApis.handleDeleteTopicsRequest"),
    ),
    INIT_PRODUCER_ID: (
        Downgrade(_FENCED, 4, E.INVALID_PRODUCER_EPOCH, "KafkaApis.handleInitProducerIdRequest"),
    ),
    ADD_PARTITIONS_TO_TXN: (
        Downgrade(_FENCED, 2, E.INVALID_PRODUCER_EPOCH,
                  "KafkaApis.handleAddPartitionsToTxnRequest"),
        Downgrade(_ABORTABLE, 5, E.INVALID_TXN_STATE,
                  "AddPartitionsToTxnManager (INVALID_TXN_STATE for older clients)"),
    ),
    ADD_OFFSETS_TO_TXN: (
        Downgrade(_FENCED, 2, E.INVALID_PRODUCER_EPOCH, "KafkaApis.handleAddOffsetsToTxnRequest"),
        Downgrade(_ABORTABLE, 4, E.INVALID_TXN_STATE, "AddOffsetsToTxn v4 adds it (KIP-890)"),
    ),
    END_TXN: (
        Downgrade(_FENCED, 2, E.INVALID_PRODUCER_EPOCH, "KafkaApis.handleEndTxnRequest"),
        Downgrade(_ABORTABLE, 4, E.INVALID_TXN_STATE, "EndTxn v4 adds it (KIP-890)"),
    ),
    TXN_OFFSET_COMMIT: (
        Downgrade(_FENCED, NEVER, E.INVALID_PRODUCER_EPOCH,
                  "TxnOffsetCommitResponse documents INVALID_PRODUCER_EPOCH; the group "
                  "coordinator's verification (AddPartitionsToTxnManager) maps PRODUCER_FENCED"),
        Downgrade(_ABORTABLE, 4, E.INVALID_TXN_STATE,
                  "GroupCoordinator/CoordinatorPartitionWriter (genericError from v4)"),
        Downgrade(E.COORDINATOR_LOAD_IN_PROGRESS, 2, E.COORDINATOR_NOT_AVAILABLE,
                  "KafkaApis.handleTxnOffsetCommitRequest (KAFKA-7296)"),
    ),
}

# api_key -> the versions below this need a look (the highest ``since``)
_BELOW: dict[int, int] = {k: max(d.since for d in ds) for k, ds in DOWNGRADES.items()}
# api_key -> {since: ...} flattened per version on first use
_MAPS: dict[tuple[int, int], dict[int, int]] = {}


def needs_downgrade(api_key: int, version: int) -> bool:
    """True when a response of this version may carry a code to downgrade (cheap)."""
    below = _BELOW.get(api_key)
    return below is not None and version < below


def code_map(api_key: int, version: int) -> dict[int, int]:
    """{newer code: Kafka's code for this version} for ``api_key`` at ``version``."""
    key = (api_key, version)
    m = _MAPS.get(key)
    if m is None:
        m = _MAPS[key] = {d.code: d.fallback for d in DOWNGRADES.get(api_key, ())
                          if version < d.since}
    return m


def downgrade(api_key: int, version: int, response: Message) -> None:
    """Rewrite, in place, every ``*error_code`` in ``response`` that ``version`` must not carry."""
    m = code_map(api_key, version)
    if m:
        _rewrite(response, m)


def _rewrite(msg: Any, m: dict[int, int]) -> None:
    errs, children = _plan(type(msg))
    for name in errs:
        new = m.get(getattr(msg, name))
        if new is not None:
            setattr(msg, name, new)
    for name in children:
        value = getattr(msg, name)
        if isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    _rewrite(item, m)
        elif isinstance(value, Message):
            _rewrite(value, m)


_PLANS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_SCALARS = frozenset({"int", "str", "bytes", "bool", "float", "UUID", "Any", "memoryview"})


def _plan(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(error code fields, fields holding structs that hold error codes) of a generated
    class, from its ``__init__`` annotations (``'int'``, ``'list[Struct]'``,
    ``'Struct | None'``; a struct is looked up in the class's module, and one without
    error codes anywhere below it is not walked)."""
    plan = _PLANS.get(cls)
    if plan is None:
        notes = getattr(cls.__init__, "__annotations__", {})
        module = sys.modules.get(cls.__module__)
        errs, children = [], []
        for name in cls.__slots__:
            note = str(notes.get(name, ""))
            if name.endswith("error_code") and note == "int":
                errs.append(name)
                continue
            inner = note.removeprefix("list[").removesuffix("]").removesuffix(" | None")
            if inner and inner not in _SCALARS and inner[0].isupper():
                child = getattr(module, inner, None)
                if not isinstance(child, type) or any(_plan(child)):
                    children.append(name)  # (a struct it cannot find is walked anyway)
        plan = _PLANS[cls] = (tuple(errs), tuple(children))
    return plan


def error_codes(msg: Any) -> list[int]:
    """Every ``*error_code`` value in ``msg`` and its nested structs (for tests and audits)."""
    out: list[int] = []
    _collect(msg, out)
    return out


def _collect(msg: Any, out: list[int]) -> None:
    errs, children = _plan(type(msg))
    out.extend(getattr(msg, name) for name in errs)
    for name in children:
        value = getattr(msg, name)
        if isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    _collect(item, out)
        elif isinstance(value, Message):
            _collect(value, out)


# ---- the codes each API may carry

def _codes(*groups: tuple[int, str]) -> dict[int, int]:
    """``(since, "NAME NAME ...")`` groups -> {code: since}."""
    out: dict[int, int] = {}
    for since, names in groups:
        for name in names.split():
            out[BY_NAME[name].code] = since
    return out


ALWAYS = frozenset({E.NONE, E.UNKNOWN_SERVER_ERROR})
_COORD = "COORDINATOR_LOAD_IN_PROGRESS COORDINATOR_NOT_AVAILABLE NOT_COORDINATOR"
_EPOCHS = "FENCED_LEADER_EPOCH UNKNOWN_LEADER_EPOCH"
_TXN = (f"{_COORD} INVALID_TXN_STATE INVALID_PRODUCER_ID_MAPPING INVALID_PRODUCER_EPOCH "
        "CONCURRENT_TRANSACTIONS TRANSACTIONAL_ID_AUTHORIZATION_FAILED")

_ALTER_CONFIGS = ("INVALID_REQUEST INVALID_CONFIG UNKNOWN_TOPIC_OR_PARTITION "
                  "TOPIC_AUTHORIZATION_FAILED CLUSTER_AUTHORIZATION_FAILED "
                  "GROUP_AUTHORIZATION_FAILED POLICY_VIOLATION NOT_CONTROLLER "
                  "INVALID_TOPIC_EXCEPTION RESOURCE_NOT_FOUND UNSUPPORTED_VERSION "
                  "REQUEST_TIMED_OUT")
_RAFT = ("INCONSISTENT_CLUSTER_ID FENCED_LEADER_EPOCH UNKNOWN_LEADER_EPOCH NOT_LEADER_OR_FOLLOWER "
         "INVALID_REQUEST UNKNOWN_TOPIC_OR_PARTITION BROKER_NOT_AVAILABLE "
         "CLUSTER_AUTHORIZATION_FAILED")

_SHARE = ("GROUP_AUTHORIZATION_FAILED TOPIC_AUTHORIZATION_FAILED UNKNOWN_TOPIC_OR_PARTITION "
          "NOT_LEADER_OR_FOLLOWER FENCED_LEADER_EPOCH UNKNOWN_TOPIC_ID INVALID_RECORD_STATE "
          "INVALID_REQUEST UNSUPPORTED_VERSION SHARE_SESSION_NOT_FOUND "
          "INVALID_SHARE_SESSION_EPOCH SHARE_SESSION_LIMIT_REACHED FENCED_STATE_EPOCH "
          "GROUP_ID_NOT_FOUND UNKNOWN_MEMBER_ID KAFKA_STORAGE_ERROR COORDINATOR_NOT_AVAILABLE "
          "NOT_COORDINATOR COORDINATOR_LOAD_IN_PROGRESS REQUEST_TIMED_OUT")

ERRORS: dict[int, dict[int, int]] = {
    PRODUCE: _codes(
        (0, "CORRUPT_MESSAGE UNKNOWN_TOPIC_OR_PARTITION NOT_LEADER_OR_FOLLOWER MESSAGE_TOO_LARGE "
            "INVALID_TOPIC_EXCEPTION RECORD_LIST_TOO_LARGE NOT_ENOUGH_REPLICAS "
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND INVALID_REQUIRED_ACKS TOPIC_AUTHORIZATION_FAILED "
            "UNSUPPORTED_FOR_MESSAGE_FORMAT INVALID_PRODUCER_EPOCH CLUSTER_AUTHORIZATION_FAILED "
            "TRANSACTIONAL_ID_AUTHORIZATION_FAILED INVALID_RECORD INVALID_TXN_STATE "
            "INVALID_PRODUCER_ID_MAPPING OUT_OF_ORDER_SEQUENCE_NUMBER DUPLICATE_SEQUENCE_NUMBER "
            "UNKNOWN_PRODUCER_ID INVALID_TIMESTAMP UNSUPPORTED_COMPRESSION_TYPE "
            "UNSUPPORTED_VERSION REQUEST_TIMED_OUT LEADER_NOT_AVAILABLE INVALID_REQUEST"),
        (4, "KAFKA_STORAGE_ERROR"),
        (11, "TRANSACTION_ABORTABLE"),
        (12, "CONCURRENT_TRANSACTIONS"),  # KIP-890: an implicit add while the last one ends
        (13, "UNKNOWN_TOPIC_ID"),
    ),
    FETCH: _codes(
        (0, "OFFSET_OUT_OF_RANGE TOPIC_AUTHORIZATION_FAILED REPLICA_NOT_AVAILABLE "
            "NOT_LEADER_OR_FOLLOWER UNKNOWN_TOPIC_OR_PARTITION UNSUPPORTED_COMPRESSION_TYPE "
            "CORRUPT_MESSAGE CLUSTER_AUTHORIZATION_FAILED INVALID_REQUEST UNSUPPORTED_VERSION"),
        (6, "KAFKA_STORAGE_ERROR"),
        (7, "FETCH_SESSION_ID_NOT_FOUND INVALID_FETCH_SESSION_EPOCH"),
        (9, _EPOCHS),
        (13, "UNKNOWN_TOPIC_ID FETCH_SESSION_TOPIC_ID_ERROR INCONSISTENT_TOPIC_ID"),
        (14, "OFFSET_MOVED_TO_TIERED_STORAGE"),
    ),
    LIST_OFFSETS: _codes(
        (0, "UNSUPPORTED_FOR_MESSAGE_FORMAT TOPIC_AUTHORIZATION_FAILED REPLICA_NOT_AVAILABLE "
            "NOT_LEADER_OR_FOLLOWER UNKNOWN_TOPIC_OR_PARTITION KAFKA_STORAGE_ERROR "
            "LEADER_NOT_AVAILABLE INVALID_REQUEST UNSUPPORTED_VERSION"),
        (4, _EPOCHS),
        (5, "OFFSET_NOT_AVAILABLE"),
    ),
    METADATA: _codes(
        (0, "UNKNOWN_TOPIC_OR_PARTITION TOPIC_AUTHORIZATION_FAILED INVALID_TOPIC_EXCEPTION "
            "LEADER_NOT_AVAILABLE REPLICA_NOT_AVAILABLE LISTENER_NOT_FOUND "
            "INVALID_REPLICATION_FACTOR INVALID_PARTITIONS POLICY_VIOLATION INVALID_REQUEST "
            "NOT_LEADER_OR_FOLLOWER "
            "UNKNOWN_TOPIC_ID"),
    ),
    OFFSET_COMMIT: _codes(
        (0, f"{_COORD} UNKNOWN_TOPIC_OR_PARTITION REQUEST_TIMED_OUT OFFSET_METADATA_TOO_LARGE "
            "REBALANCE_IN_PROGRESS INVALID_COMMIT_OFFSET_SIZE TOPIC_AUTHORIZATION_FAILED "
            "GROUP_AUTHORIZATION_FAILED INVALID_GROUP_ID"),
        (1, "ILLEGAL_GENERATION UNKNOWN_MEMBER_ID"),
        # a KIP-848 member's commit below v9 (ConsumerGroup.validateOffsetCommit)
        (2, "UNSUPPORTED_VERSION"),
        (7, "FENCED_INSTANCE_ID FENCED_MEMBER_EPOCH"),
        (9, "GROUP_ID_NOT_FOUND STALE_MEMBER_EPOCH"),
        (10, "UNKNOWN_TOPIC_ID"),
    ),
    OFFSET_FETCH: _codes(
        (0, f"{_COORD} UNKNOWN_TOPIC_OR_PARTITION TOPIC_AUTHORIZATION_FAILED "
            "GROUP_AUTHORIZATION_FAILED GROUP_ID_NOT_FOUND INVALID_GROUP_ID"),
        (7, "UNSTABLE_OFFSET_COMMIT"),
        (9, "UNKNOWN_MEMBER_ID STALE_MEMBER_EPOCH ILLEGAL_GENERATION"),
        (10, "UNKNOWN_TOPIC_ID"),
    ),
    FIND_COORDINATOR: _codes(  # INVALID_GROUP_ID: Spool's answer to an empty group id
        (0, f"{_COORD} GROUP_AUTHORIZATION_FAILED TRANSACTIONAL_ID_AUTHORIZATION_FAILED "
            "INVALID_REQUEST UNSUPPORTED_VERSION INVALID_GROUP_ID"),
        (5, "TRANSACTION_ABORTABLE"),
        (6, "CLUSTER_AUTHORIZATION_FAILED"),
    ),
    11: _codes(  # JoinGroup
        (0, f"{_COORD} INCONSISTENT_GROUP_PROTOCOL INVALID_GROUP_ID UNKNOWN_MEMBER_ID "
            "INVALID_SESSION_TIMEOUT REBALANCE_IN_PROGRESS GROUP_AUTHORIZATION_FAILED "
            "GROUP_MAX_SIZE_REACHED UNSUPPORTED_VERSION INVALID_REQUEST"),
        (4, "MEMBER_ID_REQUIRED"),
        (5, "FENCED_INSTANCE_ID"),
    ),
    12: _codes(  # Heartbeat
        (0, f"{_COORD} ILLEGAL_GENERATION UNKNOWN_MEMBER_ID REBALANCE_IN_PROGRESS "
            "GROUP_AUTHORIZATION_FAILED INVALID_GROUP_ID"),
        (3, "FENCED_INSTANCE_ID"),
    ),
    13: _codes(  # LeaveGroup
        (0, f"{_COORD} UNKNOWN_MEMBER_ID GROUP_AUTHORIZATION_FAILED INVALID_GROUP_ID"),
        (3, "FENCED_INSTANCE_ID"),
    ),
    14: _codes(  # SyncGroup
        (0, f"{_COORD} ILLEGAL_GENERATION UNKNOWN_MEMBER_ID REBALANCE_IN_PROGRESS "
            "GROUP_AUTHORIZATION_FAILED INVALID_GROUP_ID"),
        (3, "FENCED_INSTANCE_ID"),
        (5, "INCONSISTENT_GROUP_PROTOCOL"),
    ),
    15: _codes(  # DescribeGroups
        (0, f"{_COORD} GROUP_AUTHORIZATION_FAILED INVALID_GROUP_ID"),
        (6, "GROUP_ID_NOT_FOUND"),
    ),
    16: _codes(  # ListGroups
        (0, f"{_COORD} CLUSTER_AUTHORIZATION_FAILED INVALID_REQUEST"),
    ),
    18: _codes(  # ApiVersions
        (0, "UNSUPPORTED_VERSION INVALID_REQUEST"),
    ),
    19: _codes(  # CreateTopics
        (0, "TOPIC_ALREADY_EXISTS INVALID_TOPIC_EXCEPTION INVALID_PARTITIONS "
            "INVALID_REPLICATION_FACTOR INVALID_REPLICA_ASSIGNMENT INVALID_CONFIG NOT_CONTROLLER "
            "INVALID_REQUEST POLICY_VIOLATION TOPIC_AUTHORIZATION_FAILED "
            "CLUSTER_AUTHORIZATION_FAILED REQUEST_TIMED_OUT UNSUPPORTED_VERSION"),
        (6, "THROTTLING_QUOTA_EXCEEDED"),
    ),
    DELETE_TOPICS: _codes(
        (0, "UNKNOWN_TOPIC_OR_PARTITION TOPIC_AUTHORIZATION_FAILED NOT_CONTROLLER "
            "REQUEST_TIMED_OUT INVALID_TOPIC_EXCEPTION INVALID_REQUEST "
            "CLUSTER_AUTHORIZATION_FAILED"),
        (3, "TOPIC_DELETION_DISABLED"),
        (5, "THROTTLING_QUOTA_EXCEEDED"),
        (6, "UNKNOWN_TOPIC_ID UNSUPPORTED_VERSION"),
    ),
    21: _codes(  # DeleteRecords
        (0, "OFFSET_OUT_OF_RANGE TOPIC_AUTHORIZATION_FAILED UNKNOWN_TOPIC_OR_PARTITION "
            "NOT_LEADER_OR_FOLLOWER REQUEST_TIMED_OUT KAFKA_STORAGE_ERROR LEADER_NOT_AVAILABLE "
            "POLICY_VIOLATION INVALID_REQUEST NOT_ENOUGH_REPLICAS"),
    ),
    INIT_PRODUCER_ID: _codes(
        (0, f"{_COORD} TRANSACTIONAL_ID_AUTHORIZATION_FAILED CLUSTER_AUTHORIZATION_FAILED "
            "INVALID_PRODUCER_EPOCH INVALID_REQUEST INVALID_TRANSACTION_TIMEOUT "
            "CONCURRENT_TRANSACTIONS"),
        (3, "INVALID_PRODUCER_ID_MAPPING"),
        (4, "PRODUCER_FENCED"),
        (5, "TRANSACTION_ABORTABLE"),
        (6, "UNSUPPORTED_VERSION"),  # KIP-939 keepPreparedTxn, as Kafka without 2PC answers
    ),
    23: _codes(  # OffsetForLeaderEpoch
        (0, "TOPIC_AUTHORIZATION_FAILED REPLICA_NOT_AVAILABLE NOT_LEADER_OR_FOLLOWER "
            "UNKNOWN_TOPIC_OR_PARTITION KAFKA_STORAGE_ERROR CLUSTER_AUTHORIZATION_FAILED"),
        (2, _EPOCHS),
    ),
    ADD_PARTITIONS_TO_TXN: _codes(
        (0, f"{_TXN} TOPIC_AUTHORIZATION_FAILED UNKNOWN_TOPIC_OR_PARTITION "
            "OPERATION_NOT_ATTEMPTED"),
        (2, "PRODUCER_FENCED"),
        (4, "CLUSTER_AUTHORIZATION_FAILED INVALID_REQUEST"),
        (5, "TRANSACTION_ABORTABLE"),
    ),
    ADD_OFFSETS_TO_TXN: _codes(
        (0, f"{_TXN} GROUP_AUTHORIZATION_FAILED INVALID_GROUP_ID"),
        (2, "PRODUCER_FENCED"),
        (4, "TRANSACTION_ABORTABLE"),
    ),
    END_TXN: _codes(
        (0, f"{_TXN} INVALID_REQUEST"),
        (2, "PRODUCER_FENCED"),
        (4, "TRANSACTION_ABORTABLE"),
    ),
    27: _codes(  # WriteTxnMarkers
        (0, "CORRUPT_MESSAGE INVALID_PRODUCER_EPOCH UNKNOWN_TOPIC_OR_PARTITION "
            "NOT_LEADER_OR_FOLLOWER MESSAGE_TOO_LARGE RECORD_LIST_TOO_LARGE NOT_ENOUGH_REPLICAS "
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND INVALID_REQUIRED_ACKS TRANSACTION_COORDINATOR_FENCED "
            "REQUEST_TIMED_OUT CLUSTER_AUTHORIZATION_FAILED KAFKA_STORAGE_ERROR "
            "UNSUPPORTED_FOR_MESSAGE_FORMAT COORDINATOR_NOT_AVAILABLE INVALID_REQUEST"),
    ),
    TXN_OFFSET_COMMIT: _codes(
        (0, "COORDINATOR_NOT_AVAILABLE NOT_COORDINATOR INVALID_PRODUCER_EPOCH "
            "OFFSET_METADATA_TOO_LARGE GROUP_AUTHORIZATION_FAILED INVALID_COMMIT_OFFSET_SIZE "
            "TRANSACTIONAL_ID_AUTHORIZATION_FAILED "
            "UNSUPPORTED_FOR_MESSAGE_FORMAT REQUEST_TIMED_OUT UNKNOWN_TOPIC_OR_PARTITION "
            "TOPIC_AUTHORIZATION_FAILED INVALID_PRODUCER_ID_MAPPING INVALID_TXN_STATE "
            "INVALID_GROUP_ID CONCURRENT_TRANSACTIONS"),
        (2, "COORDINATOR_LOAD_IN_PROGRESS"),
        (3, "UNKNOWN_MEMBER_ID FENCED_INSTANCE_ID ILLEGAL_GENERATION REBALANCE_IN_PROGRESS"),
        (4, "TRANSACTION_ABORTABLE"),
    ),
    57: _codes(  # UpdateFeatures: FeatureControlManager, forwarding (ControllerApis)
        (0, "CLUSTER_AUTHORIZATION_FAILED INVALID_UPDATE_VERSION FEATURE_UPDATE_FAILED "
            "NOT_CONTROLLER REQUEST_TIMED_OUT INVALID_REQUEST"),
    ),
    17: _codes(  # SaslHandshake: SaslServerAuthenticator (ILLEGAL_SASL_STATE once authenticated)
        (0, "UNSUPPORTED_SASL_MECHANISM ILLEGAL_SASL_STATE"),
    ),
    36: _codes(  # SaslAuthenticate: SaslServerAuthenticator
        (0, "SASL_AUTHENTICATION_FAILED ILLEGAL_SASL_STATE UNSUPPORTED_SASL_MECHANISM"),
    ),
    29: _codes(  # DescribeAcls: AclApis
        (1, "CLUSTER_AUTHORIZATION_FAILED SECURITY_DISABLED INVALID_REQUEST"),
    ),
    30: _codes(  # CreateAcls: AclApis, AclControlManager, forwarding
        (1, "CLUSTER_AUTHORIZATION_FAILED SECURITY_DISABLED INVALID_REQUEST POLICY_VIOLATION "
            "NOT_CONTROLLER REQUEST_TIMED_OUT"),
    ),
    31: _codes(  # DeleteAcls: AclApis, AclControlManager, forwarding
        (1, "CLUSTER_AUTHORIZATION_FAILED SECURITY_DISABLED INVALID_REQUEST POLICY_VIOLATION "
            "NOT_CONTROLLER REQUEST_TIMED_OUT"),
    ),
    48: _codes(  # DescribeClientQuotas: ClientQuotasImage.describe
        (0, "CLUSTER_AUTHORIZATION_FAILED INVALID_REQUEST UNSUPPORTED_VERSION"),
    ),
    49: _codes(  # AlterClientQuotas: ClientQuotaControlManager, forwarding
        (0, "CLUSTER_AUTHORIZATION_FAILED INVALID_REQUEST POLICY_VIOLATION NOT_CONTROLLER "
            "REQUEST_TIMED_OUT"),
    ),
    50: _codes(  # DescribeUserScramCredentials: ScramImage.describe
        (0, "CLUSTER_AUTHORIZATION_FAILED RESOURCE_NOT_FOUND DUPLICATE_RESOURCE"),
    ),
    51: _codes(  # AlterUserScramCredentials: ScramControlManager, forwarding
        (0, "CLUSTER_AUTHORIZATION_FAILED DUPLICATE_RESOURCE UNACCEPTABLE_CREDENTIAL "
            "UNSUPPORTED_SASL_MECHANISM RESOURCE_NOT_FOUND POLICY_VIOLATION NOT_CONTROLLER "
            "REQUEST_TIMED_OUT"),
    ),
    71: _codes(  # GetTelemetrySubscriptions: ClientMetricsManager
        (0, "THROTTLING_QUOTA_EXCEEDED INVALID_REQUEST CLUSTER_AUTHORIZATION_FAILED"),
    ),
    72: _codes(  # PushTelemetry: ClientMetricsManager.validatePushRequest, export
        (0, "INVALID_REQUEST THROTTLING_QUOTA_EXCEEDED UNKNOWN_SUBSCRIPTION_ID "
            "UNSUPPORTED_COMPRESSION_TYPE TELEMETRY_TOO_LARGE INVALID_RECORD "
            "CLUSTER_AUTHORIZATION_FAILED"),
    ),
    74: _codes(  # ListConfigResources: KafkaApis.handleListConfigResources
        (0, "CLUSTER_AUTHORIZATION_FAILED UNSUPPORTED_VERSION"),
    ),
    # the share coordinator's APIs: ShareCoordinatorService / ShareCoordinatorShard
    83: _codes((0, f"CLUSTER_AUTHORIZATION_FAILED {_COORD} INVALID_GROUP_ID INVALID_REQUEST "
                   "UNKNOWN_TOPIC_OR_PARTITION FENCED_STATE_EPOCH")),  # InitializeShareGroupState
    84: _codes((0, f"CLUSTER_AUTHORIZATION_FAILED {_COORD} INVALID_GROUP_ID INVALID_REQUEST "
                   "UNKNOWN_TOPIC_OR_PARTITION FENCED_LEADER_EPOCH")),  # ReadShareGroupState
    85: _codes((0, f"CLUSTER_AUTHORIZATION_FAILED {_COORD} INVALID_GROUP_ID INVALID_REQUEST "
                   "UNKNOWN_TOPIC_OR_PARTITION FENCED_LEADER_EPOCH FENCED_STATE_EPOCH")),
    86: _codes((0, f"CLUSTER_AUTHORIZATION_FAILED {_COORD} INVALID_GROUP_ID INVALID_REQUEST")),
    87: _codes((0, f"CLUSTER_AUTHORIZATION_FAILED {_COORD} INVALID_GROUP_ID INVALID_REQUEST "
                   "UNKNOWN_TOPIC_OR_PARTITION FENCED_LEADER_EPOCH")),
    32: _codes(  # DescribeConfigs
        (0, "INVALID_REQUEST UNKNOWN_TOPIC_OR_PARTITION TOPIC_AUTHORIZATION_FAILED "
            "CLUSTER_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED INVALID_TOPIC_EXCEPTION "
            "RESOURCE_NOT_FOUND KAFKA_STORAGE_ERROR UNSUPPORTED_VERSION"),
    ),
    33: _codes(  # AlterConfigs
        (0, f"{_ALTER_CONFIGS}"),
    ),
    35: _codes(  # DescribeLogDirs
        (0, "KAFKA_STORAGE_ERROR"),
        (3, "CLUSTER_AUTHORIZATION_FAILED"),
    ),
    37: _codes(  # CreatePartitions
        (0, "INVALID_PARTITIONS UNKNOWN_TOPIC_OR_PARTITION INVALID_REPLICA_ASSIGNMENT "
            "REASSIGNMENT_IN_PROGRESS TOPIC_AUTHORIZATION_FAILED CLUSTER_AUTHORIZATION_FAILED "
            "INVALID_REQUEST NOT_CONTROLLER POLICY_VIOLATION INVALID_REPLICATION_FACTOR "
            "INVALID_TOPIC_EXCEPTION REQUEST_TIMED_OUT UNSUPPORTED_VERSION"),
        (3, "THROTTLING_QUOTA_EXCEEDED"),
    ),
    68: _codes(  # ConsumerGroupHeartbeat: KafkaApis, GroupMetadataManager.consumerGroupHeartbeat
        (0, f"{_COORD} GROUP_AUTHORIZATION_FAILED TOPIC_AUTHORIZATION_FAILED INVALID_REQUEST "
            "UNKNOWN_MEMBER_ID FENCED_MEMBER_EPOCH FENCED_INSTANCE_ID UNRELEASED_INSTANCE_ID "
            "UNSUPPORTED_ASSIGNOR GROUP_MAX_SIZE_REACHED GROUP_ID_NOT_FOUND UNSUPPORTED_VERSION"),
        (1, "INVALID_REGULAR_EXPRESSION"),
    ),
    69: _codes(  # ConsumerGroupDescribe: KafkaApis, GroupMetadataManager.consumerGroupDescribe
        (0, f"{_COORD} GROUP_AUTHORIZATION_FAILED TOPIC_AUTHORIZATION_FAILED INVALID_REQUEST "
            "INVALID_GROUP_ID GROUP_ID_NOT_FOUND UNSUPPORTED_VERSION"),
    ),
    42: _codes(  # DeleteGroups (DeleteGroupsResponse)
        (0, f"{_COORD} INVALID_GROUP_ID GROUP_AUTHORIZATION_FAILED NON_EMPTY_GROUP "
            "GROUP_ID_NOT_FOUND"),
    ),
    43: _codes(  # ElectLeaders
        (0, "CLUSTER_AUTHORIZATION_FAILED ELECTION_NOT_NEEDED ELIGIBLE_LEADERS_NOT_AVAILABLE "
            "PREFERRED_LEADER_NOT_AVAILABLE UNKNOWN_TOPIC_OR_PARTITION INVALID_REQUEST "
            "NOT_CONTROLLER REQUEST_TIMED_OUT INVALID_TOPIC_EXCEPTION"),
    ),
    44: _codes(  # IncrementalAlterConfigs
        (0, f"{_ALTER_CONFIGS}"),
    ),
    45: _codes(  # AlterPartitionReassignments
        (0, "CLUSTER_AUTHORIZATION_FAILED INVALID_REPLICA_ASSIGNMENT UNKNOWN_TOPIC_OR_PARTITION "
            "NO_REASSIGNMENT_IN_PROGRESS INVALID_REPLICATION_FACTOR NOT_CONTROLLER "
            "REQUEST_TIMED_OUT INVALID_REQUEST UNSUPPORTED_VERSION"),
    ),
    46: _codes(  # ListPartitionReassignments
        (0, "CLUSTER_AUTHORIZATION_FAILED NOT_CONTROLLER REQUEST_TIMED_OUT "
            "UNKNOWN_TOPIC_OR_PARTITION INVALID_REQUEST"),
    ),
    47: _codes(  # OffsetDelete (OffsetDeleteResponse)
        (0, f"{_COORD} GROUP_SUBSCRIBED_TO_TOPIC TOPIC_AUTHORIZATION_FAILED "
            "UNKNOWN_TOPIC_OR_PARTITION GROUP_AUTHORIZATION_FAILED INVALID_GROUP_ID "
            "GROUP_ID_NOT_FOUND NON_EMPTY_GROUP"),
    ),
    55: _codes(  # DescribeQuorum (KafkaRaftClient; NOT_CONTROLLER: Spool's node without quorum)
        (0, "NOT_LEADER_OR_FOLLOWER UNKNOWN_TOPIC_OR_PARTITION INVALID_REQUEST "
            "CLUSTER_AUTHORIZATION_FAILED BROKER_NOT_AVAILABLE NOT_CONTROLLER"),
    ),
    60: _codes(  # DescribeCluster
        (0, "CLUSTER_AUTHORIZATION_FAILED INVALID_REQUEST"),
        (1, "MISMATCHED_ENDPOINT_TYPE UNSUPPORTED_ENDPOINT_TYPE"),
    ),
    61: _codes(  # DescribeProducers
        (0, "TOPIC_AUTHORIZATION_FAILED UNKNOWN_TOPIC_OR_PARTITION NOT_LEADER_OR_FOLLOWER "
            "KAFKA_STORAGE_ERROR INVALID_REQUEST INVALID_TOPIC_EXCEPTION"),
    ),
    65: _codes(  # DescribeTransactions
        (0, f"{_COORD} TRANSACTIONAL_ID_NOT_FOUND TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    ),
    66: _codes(  # ListTransactions
        (0, f"{_COORD} INVALID_REQUEST"),
        (2, "INVALID_REGULAR_EXPRESSION"),  # KIP-1152: a pattern that does not compile
    ),
    75: _codes(  # DescribeTopicPartitions
        (0, "UNKNOWN_TOPIC_OR_PARTITION TOPIC_AUTHORIZATION_FAILED INVALID_REQUEST "
            "INVALID_TOPIC_EXCEPTION"),
    ),
    # the controller plane's own APIs (KafkaRaftClient, ControllerApis, QuorumController)
    52: _codes((0, _RAFT + " INCONSISTENT_VOTER_SET"), (1, "INVALID_VOTER_KEY")),  # Vote
    53: _codes((0, _RAFT + " INCONSISTENT_VOTER_SET"), (1, "INVALID_VOTER_KEY")),  # Begin...
    54: _codes((0, _RAFT + " INCONSISTENT_VOTER_SET"), (1, "INVALID_VOTER_KEY")),  # End...
    59: _codes((0, _RAFT + " SNAPSHOT_NOT_FOUND POSITION_OUT_OF_RANGE")),  # FetchSnapshot
    56: _codes(  # AlterPartition
        (0, "STALE_BROKER_EPOCH NOT_CONTROLLER UNKNOWN_TOPIC_OR_PARTITION FENCED_LEADER_EPOCH "
            "INVALID_UPDATE_VERSION INVALID_REQUEST OPERATION_NOT_ATTEMPTED "
            "CLUSTER_AUTHORIZATION_FAILED NOT_LEADER_OR_FOLLOWER"),
        (2, "INELIGIBLE_REPLICA NEW_LEADER_ELECTED UNKNOWN_TOPIC_ID"),
    ),
    62: _codes(  # BrokerRegistration
        (0, "CLUSTER_AUTHORIZATION_FAILED NOT_CONTROLLER DUPLICATE_BROKER_REGISTRATION "
            "INCONSISTENT_CLUSTER_ID UNSUPPORTED_VERSION INVALID_REGISTRATION INVALID_REQUEST"),
    ),
    63: _codes(  # BrokerHeartbeat
        (0, "CLUSTER_AUTHORIZATION_FAILED NOT_CONTROLLER STALE_BROKER_EPOCH "
            "BROKER_ID_NOT_REGISTERED INVALID_REQUEST"),
    ),
    64: _codes(  # UnregisterBroker
        (0, "CLUSTER_AUTHORIZATION_FAILED NOT_CONTROLLER BROKER_ID_NOT_REGISTERED "
            "INVALID_REQUEST"),
    ),
    67: _codes(  # AllocateProducerIds
        (0, "CLUSTER_AUTHORIZATION_FAILED NOT_CONTROLLER STALE_BROKER_EPOCH "
            "BROKER_ID_NOT_REGISTERED INVALID_REQUEST"),
    ),
    78: _codes(  # ShareFetch (KafkaApis, SharePartitionManager, the persister's answers)
        (1, f"{_SHARE} UNKNOWN_TOPIC_ID OFFSET_OUT_OF_RANGE CORRUPT_MESSAGE"),
    ),
    79: _codes(  # ShareAcknowledge
        (1, _SHARE),
    ),
    76: _codes(  # ShareGroupHeartbeat (GroupMetadataManager.shareGroupHeartbeat)
        (1, f"{_COORD} UNSUPPORTED_VERSION INVALID_REQUEST GROUP_AUTHORIZATION_FAILED "
            "TOPIC_AUTHORIZATION_FAILED GROUP_ID_NOT_FOUND GROUP_MAX_SIZE_REACHED "
            "UNKNOWN_MEMBER_ID FENCED_MEMBER_EPOCH REQUEST_TIMED_OUT NOT_ENOUGH_REPLICAS"),
    ),
    77: _codes(  # ShareGroupDescribe
        (1, f"{_COORD} UNSUPPORTED_VERSION GROUP_AUTHORIZATION_FAILED GROUP_ID_NOT_FOUND"),
    ),
    90: _codes(  # DescribeShareGroupOffsets (the persister's read_summary answers)
        (0, f"{_COORD} UNSUPPORTED_VERSION GROUP_AUTHORIZATION_FAILED GROUP_ID_NOT_FOUND "
            "TOPIC_AUTHORIZATION_FAILED UNKNOWN_TOPIC_OR_PARTITION FENCED_LEADER_EPOCH "
            "FENCED_STATE_EPOCH INVALID_REQUEST"),
    ),
    91: _codes(  # AlterShareGroupOffsets (the persister's initialize answers)
        (0, f"{_COORD} UNSUPPORTED_VERSION GROUP_AUTHORIZATION_FAILED GROUP_ID_NOT_FOUND "
            "INVALID_GROUP_ID NON_EMPTY_GROUP TOPIC_AUTHORIZATION_FAILED "
            "UNKNOWN_TOPIC_OR_PARTITION "
            "INVALID_REQUEST FENCED_STATE_EPOCH REQUEST_TIMED_OUT NOT_ENOUGH_REPLICAS"),
    ),
    92: _codes(  # DeleteShareGroupOffsets (the persister's delete answers)
        (0, f"{_COORD} UNSUPPORTED_VERSION GROUP_AUTHORIZATION_FAILED GROUP_ID_NOT_FOUND "
            "INVALID_GROUP_ID NON_EMPTY_GROUP TOPIC_AUTHORIZATION_FAILED "
            "UNKNOWN_TOPIC_OR_PARTITION "
            "INVALID_REQUEST REQUEST_TIMED_OUT NOT_ENOUGH_REPLICAS"),
    ),
}

# The same key on a controller listener, where its handler is another one.
CONTROLLER_ERRORS: dict[int, dict[int, int]] = {
    FETCH: _codes((0, _RAFT)),  # the Raft fetch of __cluster_metadata
}


def allowed(api_key: int, version: int, plane: str = "broker") -> frozenset[int] | None:
    """The codes a response of ``api_key`` at ``version`` may carry on a listener of
    ``plane`` (``"broker"``, ``"controller"``); None if not audited."""
    table = (CONTROLLER_ERRORS.get(api_key) if plane == "controller" else None) or ERRORS.get(
        api_key)
    if table is None:
        return None
    return ALWAYS | {c for c, since in table.items() if version >= since}
