"""Who may use the admin APIs: Kafka's checks, as its brokers and controllers make them.

Every check asks ``spool.broker.authz`` (``allowed`` / ``allowed_names``) for the
request's principal; with no authorizer configured every answer is yes. The rules are
Kafka's (``KafkaApis``, ``ControllerApis``, ``ConfigHelper``, ``AuthHelper``), per API,
with where the refusal goes in the response. "Checked first" means the refusal wins over
any other error: a topic the principal may not see answers TOPIC_AUTHORIZATION_FAILED
whether it exists or not, so refusals reveal nothing.

Topics and records (``spool.broker.handlers.admin``):

- CreateTopics: CREATE on the cluster, or else CREATE on each topic; refused topics get
  TOPIC_AUTHORIZATION_FAILED "Authorization failed." and are not created. A created topic
  whose configs the principal may not describe (DESCRIBE_CONFIGS on the topic, implied by
  ALTER_CONFIGS) is answered without configs, with num_partitions and
  replication_factor -1 and topic_config_error_code TOPIC_AUTHORIZATION_FAILED (v5+).
- DeleteTopics: DELETE on the cluster, or else DELETE on each topic. By name: a topic the
  principal may not DESCRIBE, or may describe but not delete, is TOPIC_AUTHORIZATION_FAILED
  (so a missing topic is UNKNOWN_TOPIC_OR_PARTITION only to who may describe it). By id
  (v6+): an unknown id is UNKNOWN_TOPIC_ID; a known one the principal may not delete is
  TOPIC_AUTHORIZATION_FAILED, with the name left null unless it may describe the topic.
- CreatePartitions: ALTER on each topic (no cluster-wide shortcut), else
  TOPIC_AUTHORIZATION_FAILED with no message.
- DeleteRecords: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED on each of its
  partitions, low_watermark -1.

Configs (``spool.broker.handlers.configs``), per resource, the others go on:

- DescribeConfigs: DESCRIBE_CONFIGS on the topic (TOPIC), the cluster (BROKER,
  BROKER_LOGGER, CLIENT_METRICS) or the group (GROUP); refused: the resource's
  error_code TOPIC_/CLUSTER_/GROUP_AUTHORIZATION_FAILED with Kafka's default message
  ("Topic authorization failed.", ...) and no configs.
- AlterConfigs, IncrementalAlterConfigs: ALTER_CONFIGS on the same resources, the same
  errors; a refused resource changes nothing, the others are applied.

Cluster operations, the whole request refused with CLUSTER_AUTHORIZATION_FAILED
"Cluster authorization failed." where the response has a top-level error:

- ElectLeaders: ALTER (top level, and each partition named, as Kafka's error response).
- AlterPartitionReassignments: ALTER (top level and each partition named).
- ListPartitionReassignments: DESCRIBE (top level; the topics named listed back, their
  partitions without replicas).
- UpdateFeatures: ALTER (top level, no per-feature results).
- DescribeLogDirs: DESCRIBE (top-level error_code from v3, no results).
- ListConfigResources: DESCRIBE_CONFIGS (top level, no resources).
- DescribeQuorum: DESCRIBE (top level).
- DescribeCluster: served to anyone, as Kafka's broker does; only its
  cluster_authorized_operations, when asked for, is 0 unless the principal may DESCRIBE
  the cluster.
- GetTelemetrySubscriptions and PushTelemetry: no check (Kafka checks none).

The controller plane (``ControllerApis``): CLUSTER_ACTION for what brokers and voters
send (BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds, Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot of the metadata log), ALTER
for UnregisterBroker, ElectLeaders, AlterPartitionReassignments and UpdateFeatures,
DESCRIBE for ListPartitionReassignments and DescribeQuorum; each refused whole with
CLUSTER_AUTHORIZATION_FAILED in its error_code.

Forwarded requests. Kafka's broker wraps what it forwards in an Envelope carrying the
client's principal; the controller checks CLUSTER_ACTION on the broker, then the client's
principal. Spool forwards the request itself, over the broker's own connection, with no
Envelope: the broker checks the client's principal BEFORE it forwards (only what is
allowed goes to the controller, the refusals are merged back in request order), and
that check is the one that counts. On the controller plane a caller allowed
CLUSTER_ACTION (a broker, a super user) is trusted as Kafka trusts an Envelope's sender:
its CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and
IncrementalAlterConfigs are not checked again; any other caller (an admin client talking
to a controller listener) is checked there as ControllerApis checks it, and so for
CreateAcls, DeleteAcls, AlterUserScramCredentials (ALTER on the cluster) and
AlterClientQuotas (ALTER_CONFIGS) (``spool.broker.handlers.security_controller``).

Responses keep the request's order (Kafka's controller lists refusals after the
results; clients match results by name).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

from spool.broker import authz
from spool.broker.authz import CLUSTER_NAME
from spool.protocol._generated.create_partitions_response import CreatePartitionsTopicResult
from spool.protocol._generated.create_topics_response import CreatableTopicResult
from spool.protocol._generated.delete_topics_response import DeletableTopicResult
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError
from spool.protocol.primitives import ZERO_UUID

# Kafka's default messages (``Errors.java``), which ``new ApiError(error)`` carries.
MESSAGES = {
    Errors.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    Errors.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}
CREATE_REFUSED = "Authorization failed."  # CreateTopics' own message

# Config resource types (DescribeConfigs, AlterConfigs...): the ACL resource asked, the error.
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS, CONFIG_GROUP = (
    2, 4, 8, 16, 32)
_CONFIG_ACL = {
    CONFIG_TOPIC: (ResourceType.TOPIC, Errors.TOPIC_AUTHORIZATION_FAILED),
    CONFIG_BROKER: (ResourceType.CLUSTER, Errors.CLUSTER_AUTHORIZATION_FAILED),
    CONFIG_BROKER_LOGGER: (ResourceType.CLUSTER, Errors.CLUSTER_AUTHORIZATION_FAILED),
    CONFIG_CLIENT_METRICS: (ResourceType.CLUSTER, Errors.CLUSTER_AUTHORIZATION_FAILED),
    CONFIG_GROUP: (ResourceType.GROUP, Errors.GROUP_AUTHORIZATION_FAILED),
}


def refused(code: int) -> KafkaError:
    """``code`` with Kafka's default message."""
    return KafkaError(code, MESSAGES[code])


def cluster_allowed(ctx, op: AclOperation, log_denied: bool = True) -> bool:
    """May the request's principal perform ``op`` on the cluster? ``log_denied=False`` for
    a probe whose refusal is no denial (Kafka's ``logIfDenied = false``)."""
    return authz.allowed_cluster(ctx, op, log_denied)


def check_cluster(ctx, op: AclOperation) -> None:
    """CLUSTER_AUTHORIZATION_FAILED unless the principal may ``op`` the cluster."""
    if not cluster_allowed(ctx, op):
        raise refused(Errors.CLUSTER_AUTHORIZATION_FAILED)


def check_config_resource(ctx, op: AclOperation, config_type: int, name: str) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on one config resource; an unknown type passes (the
    handler refuses it as it always did)."""
    acl = _CONFIG_ACL.get(config_type)
    if acl is None:
        return
    rtype, code = acl
    target = CLUSTER_NAME if rtype == ResourceType.CLUSTER else name
    if not authz.allowed(ctx, op, rtype, target):
        raise refused(code)


def topics_allowed(ctx, op: AclOperation, names, cluster_op: AclOperation | None = None,
                   log_denied: bool = True) -> set[str]:
    """The names among ``names`` the principal may ``op``; all of them if it may
    ``cluster_op`` the cluster (CreateTopics' CREATE, DeleteTopics' DELETE: a probe, its
    refusal not logged, as Kafka's)."""
    names = {n for n in names if n is not None}
    if cluster_op is not None and cluster_allowed(ctx, cluster_op, log_denied=False):
        return names
    return authz.allowed_names(ctx, op, ResourceType.TOPIC, names, log_denied)


def trusted_forwarder(ctx) -> bool:
    """On the controller plane: a caller allowed CLUSTER_ACTION (a broker forwarding what
    it has checked) is not checked again (module doc)."""
    return cluster_allowed(ctx, AclOperation.CLUSTER_ACTION, log_denied=False)


# ---- the topic APIs' refusals, shared by the broker (before forwarding) and the controller


async def run_allowed(req, field: str, refusals: list, empty, results_field: str, run):
    """Run ``run(sub_request)`` on the items of ``req.<field>`` not refused and answer every
    item in request order: its result, or its refusal from ``refusals`` (None: allowed).
    ``empty`` is the answer when everything is refused. ``run`` answers one result per
    item, in order (``spool.cluster.topic_ops``, and the forwarding's timeout answer)."""
    if not any(refusals):
        return await run(req)
    items = getattr(req, field)
    got: Iterator = iter(())
    reply = empty
    if not all(refusals):
        sub = copy.copy(req)
        setattr(sub, field, [x for x, no in zip(items, refusals, strict=True) if no is None])
        reply = await run(sub)
        got = iter(getattr(reply, results_field))
    setattr(reply, results_field, [next(got) if no is None else no for no in refusals])
    return reply


def create_topics_checks(ctx, req) -> tuple[list[CreatableTopicResult | None], set[str]]:
    """CreateTopics: each topic's refusal (or None), and the names whose configs the
    principal may describe."""
    names = [t.name for t in req.topics]
    creatable = topics_allowed(ctx, AclOperation.CREATE, names, cluster_op=AclOperation.CREATE)
    refusals = [None if t.name in creatable else CreatableTopicResult(
        name=t.name, error_code=Errors.TOPIC_AUTHORIZATION_FAILED, error_message=CREATE_REFUSED,
        num_partitions=-1, replication_factor=-1, configs=None) for t in req.topics]
    return refusals, topics_allowed(ctx, AclOperation.DESCRIBE_CONFIGS, names, log_denied=False)


def hide_configs(results, describable: set[str]) -> None:
    """A created topic whose configs the principal may not describe: none in the answer
    (Kafka's ReplicationControlManager: topic_config_error_code, -1 counts)."""
    for r in results:
        if r.error_code == 0 and r.name not in describable:
            r.configs = []
            r.num_partitions = r.replication_factor = -1
            r.topic_config_error_code = Errors.TOPIC_AUTHORIZATION_FAILED


def delete_topics_refusals(ctx, targets) -> list[DeletableTopicResult | None]:
    """DeleteTopics (``ControllerApis.deleteTopics``) for each (name, id) target: its
    refusal, or None when the principal may delete it."""
    if cluster_allowed(ctx, AclOperation.DELETE, log_denied=False):
        return [None] * len(targets)
    view = getattr(ctx.broker, "view", None)
    names = [(None if view is None else view.topic_name(tid))
             if name is None and tid is not None else name for name, tid in targets]
    describable = topics_allowed(ctx, AclOperation.DESCRIBE, names)
    deletable = topics_allowed(ctx, AclOperation.DELETE, names)
    out: list[DeletableTopicResult | None] = []
    for (given, tid), name in zip(targets, names, strict=True):
        tid = tid or ZERO_UUID
        by_id = given is None and tid != ZERO_UUID
        if by_id and name is None:
            out.append(DeletableTopicResult(name=None, topic_id=tid,
                                            error_code=Errors.UNKNOWN_TOPIC_ID,
                                            error_message=f"no topic with id {tid}"))
        elif name in deletable and (by_id or name in describable):
            out.append(None)
        else:  # by id, the name only to who may describe the topic
            out.append(DeletableTopicResult(
                name=name if not by_id or name in describable else None, topic_id=tid,
                error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                error_message=MESSAGES[Errors.TOPIC_AUTHORIZATION_FAILED]))
    return out


def delete_topics_targets(req, version: int) -> tuple[str, list]:
    """The field naming DeleteTopics' topics at ``version`` and its (name, id) targets."""
    if version >= 6:
        return "topics", [(t.name, t.topic_id) for t in req.topics]
    return "topic_names", [(n, None) for n in req.topic_names]


def create_partitions_refusals(ctx, req) -> list[CreatePartitionsTopicResult | None]:
    """CreatePartitions: ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED, no message."""
    alterable = topics_allowed(ctx, AclOperation.ALTER, [t.name for t in req.topics])
    return [None if t.name in alterable else CreatePartitionsTopicResult(
        name=t.name, error_code=Errors.TOPIC_AUTHORIZATION_FAILED, error_message=None)
        for t in req.topics]


def config_refusals(ctx, req, op: AclOperation, result_cls) -> list:
    """AlterConfigs / IncrementalAlterConfigs on the controller: each resource's refusal."""
    out = []
    for r in req.resources:
        try:
            check_config_resource(ctx, op, r.resource_type, r.resource_name)
            out.append(None)
        except KafkaError as e:
            out.append(result_cls(error_code=e.code, error_message=e.message,
                                  resource_type=r.resource_type, resource_name=r.resource_name))
    return out
