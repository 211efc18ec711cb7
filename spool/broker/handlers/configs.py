"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Resources: TOPIC (2), BROKER (4, name = node id, or "" for the cluster
default), CLIENT_METRICS (16, telemetry subscriptions: ``spool.cluster.client_metrics``;
described with their stored values only, source CLIENT_METRICS_CONFIG, as Kafka) and GROUP
(32, a group id: ``spool.cluster.group_config``; every group key described, GROUP_CONFIG
when the group sets it, else DEFAULT_CONFIG with the broker key's value, its synonym
itself as Kafka 4.2; an alter is checked by this broker against its min/max bounds, then
applied or forwarded to the controller resolved to SET/DELETE). Topic describe lists every topic key with its effective value,
source (TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and, on request, synonyms and documentation. AlterConfigs
replaces a resource's whole override set; IncrementalAlterConfigs SETs,
DELETEs, APPENDs to or SUBTRACTs from list values one key at a time, by the
rules both modes share (``spool.cluster.config_ops.incremental_changes``: a
SUBTRACT may empty a list). A null value (but a DELETE's) is INVALID_REQUEST, as
in Kafka. Every value is checked by the key's validator: INVALID_CONFIG naming
the key, the value and what is allowed.
Broker resources accept every key Kafka 4.2 updates dynamically, checked by
this broker as Kafka's does (``spool.broker.dynamic_config``: INVALID_REQUEST for
a key that needs a restart...), and DescribeConfigs reports them with
DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG and Kafka's synonyms
(``spool.broker.config_view``). In a cluster, AlterConfigs and
IncrementalAlterConfigs go to the active controller (``spool.broker.forwarding``)
after that check, a BROKER resource's operations resolved to SET/DELETE, and the
answers are put back in request order; DescribeConfigs answers from the
broker's view of the metadata.

Authorization (``spool.broker.admin_authz``, Kafka's ConfigHelper and ControllerApis):
DescribeConfigs needs DESCRIBE_CONFIGS, AlterConfigs and IncrementalAlterConfigs
ALTER_CONFIGS, on the topic for a TOPIC resource, on the group for a GROUP one and on the
cluster for BROKER, BROKER_LOGGER and CLIENT_METRICS ones; a refused resource answers
TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED (checked first, whether the
topic exists or not), with no configs, and changes nothing; the others go on. On a
cluster the broker checks before it forwards: the controller gets only the allowed
resources (Spool forwards without Kafka's Envelope, so this check is the one that counts).
"""

from __future__ import annotations

from spool.broker.admin_authz import check_config_resource
from spool.broker.config import known_key
from spool.broker.config_view import ConfigEntry
from spool.broker.dynamic_config import check_broker_configs, check_resource_name
from spool.broker.forwarding import forward
from spool.broker.registry import handles
from spool.cluster import client_metrics, group_config
from spool.cluster.client_metrics import CLIENT_METRICS_RESOURCE
from spool.cluster.config_ops import DELETE, SET, incremental_changes, refuse_null_values
from spool.cluster.group_config import GROUP_RESOURCE
from spool.protocol._generated import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from spool.protocol._generated.alter_configs_response import AlterConfigsResourceResponse
from spool.protocol._generated.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from spool.protocol._generated.incremental_alter_configs_request import (
    AlterableConfig,
)
from spool.protocol._generated.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from spool.protocol._generated.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError
from spool.storage.config import format_value

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS_CONFIG = 7  # DescribeConfigs' source of a CLIENT_METRICS value
GROUP_CONFIG = 8  # ... of a value set on a GROUP (the admin client's DYNAMIC_GROUP_CONFIG)
DEFAULT_CONFIG = 5
CONFIG_TYPES = {"boolean": 1, "bool": 1, "string": 2, "int": 3, "short": 4, "long": 5,
                "double": 6, "list": 7, "class": 8, "password": 9, "unknown": 0}


def _check_broker_name(broker, name: str) -> None:
    """DescribeConfigs answers for "" and this broker only (Kafka's ConfigHelper)."""
    if name == "":
        return
    try:
        given = int(name)
    except ValueError:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"Broker id must be an integer, but it is: {name}") from None
    if given != broker.node_id:
        raise KafkaError(Errors.INVALID_REQUEST, f"Unexpected broker id, expected "
                         f"{broker.node_id} or empty string, but received {name}")


def _describe_resource(ctx, res, include_synonyms: bool, include_docs: bool, version: int):
    broker = ctx.broker
    out = DescribeConfigsResult(error_code=0, error_message=None,
                                resource_type=res.resource_type,
                                resource_name=res.resource_name, configs=[])
    try:
        check_config_resource(ctx, AclOperation.DESCRIBE_CONFIGS, res.resource_type,
                              res.resource_name)
        if res.resource_type == TOPIC:
            if not broker.has_topic(res.resource_name):
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {res.resource_name!r} does not exist")
            entries = broker.describe_topic_configs(res.resource_name)
        elif res.resource_type == BROKER:
            _check_broker_name(broker, res.resource_name)
            entries = broker.describe_broker_configs(res.resource_name)
        elif res.resource_type == CLIENT_METRICS_RESOURCE:
            entries = _client_metrics_entries(broker, res.resource_name)
        elif res.resource_type == GROUP_RESOURCE:
            entries = _group_entries(broker, res.resource_name)
        else:
            raise KafkaError(Errors.INVALID_REQUEST,
                             f"resource type {res.resource_type} is not supported")
        wanted = set(res.configuration_keys) if res.configuration_keys is not None else None
        for e in entries:
            if wanted is not None and e.name not in wanted:
                continue
            source = int(e.source)
            out.configs.append(DescribeConfigsResourceResult(
                name=e.name, value=e.value, read_only=e.read_only,
                config_source=source, is_sensitive=e.sensitive,
                synonyms=[DescribeConfigsSynonym(name=n, value=v, source=int(s))
                          for n, v, s in e.synonyms] if include_synonyms else [],
                config_type=CONFIG_TYPES.get(e.type, 2),
                documentation=(e.doc or None) if include_docs else None,
            ))
    except KafkaError as e:
        out.error_code = e.code
        out.error_message = e.message
    return out


@handles(32, 1, 4)
async def describe_configs(ctx, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = [
        _describe_resource(ctx, r, req.include_synonyms, req.include_documentation,
                           ctx.api_version)
        for r in req.resources
    ]
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _client_metrics_entries(broker, name: str) -> list[ConfigEntry]:
    """A CLIENT_METRICS resource's stored values (Kafka lists only those; none if unknown)."""
    if not name:
        raise KafkaError(Errors.INVALID_REQUEST,
                         "Client metrics subscription name must not be empty")
    values = broker.view.resource_configs(CLIENT_METRICS_RESOURCE).get(name, {})
    return [ConfigEntry(k, v, CLIENT_METRICS_CONFIG, client_metrics.TYPES.get(k, "string"),
                        doc=client_metrics.DOCS.get(k, "")) for k, v in sorted(values.items())]


def _group_entries(broker, name: str) -> list[ConfigEntry]:
    """Every group config key with the group's value: GROUP_CONFIG when the group sets it,
    else DEFAULT_CONFIG (the broker key's value, else Kafka's default); its one synonym is
    itself, as Kafka 4.2's ConfigHelper.createGroupConfigEntry."""
    if not name:
        raise KafkaError(Errors.INVALID_REQUEST, "Group name must not be empty")
    own = broker.group_configs.stored(name)
    out = []
    for key in sorted(group_config.KEYS):
        spec = group_config.KEYS[key].key
        value = format_value(spec, broker.group_configs.get(name, key))
        source = GROUP_CONFIG if key in own else DEFAULT_CONFIG
        out.append(ConfigEntry(key, value, source, spec.type, doc=spec.doc,
                               synonyms=((key, value, source),)))
    return out


def _group_changes(broker, r, incremental: bool) -> dict[str, str | None]:
    """A GROUP resource's changes (None: delete), its whole new set checked against this
    broker's bounds (``spool.cluster.group_config.validate``); on a cluster the
    controller checks names and values again against its image."""
    _check_config_names(r)
    refuse_null_values(r.configs, incremental)
    own = broker.group_configs.stored(r.resource_name)
    if incremental:
        changes = incremental_changes(GROUP_RESOURCE, own, r.configs, group_config.key_type)
    else:
        changes = {**dict.fromkeys(own), **{c.name: c.value for c in r.configs}}
    after = {k: v for k, v in {**own, **changes}.items() if v is not None}
    group_config.validate(r.resource_name, after, broker.config.get)
    return {k: v for k, v in changes.items() if own.get(k) != v}


def _alter_client_metrics(broker, name: str, changes: dict[str, str | None], replace: bool,
                          validate_only: bool) -> None:
    if replace:  # AlterConfigs: the keys not given go
        current = broker.view.resource_configs(CLIENT_METRICS_RESOURCE).get(name, {})
        changes = {**dict.fromkeys(current), **changes}
    broker.metadata.alter_resource_config(
        CLIENT_METRICS_RESOURCE, name, changes, lambda new: client_metrics.validate(name, new),
        validate_only=validate_only)


def _broker_changes(broker, r, incremental: bool) -> dict[str, str | None]:
    """Kafka's broker-side step for a BROKER resource (``ConfigAdminManager.preprocess``,
    both modes): the resource's new values (None: delete), checked by
    ``spool.broker.dynamic_config``."""
    _check_config_names(r)
    refuse_null_values(r.configs, incremental)
    check_resource_name(r.resource_name, broker.node_id)
    own = broker.view.broker_resource_configs(r.resource_name)
    if incremental:
        changes = incremental_changes(BROKER, own, r.configs, _broker_key_type,
                                      _broker_key_default)
    else:
        changes = {**{k: None for k in own}, **{c.name: c.value for c in r.configs}}
    after = {k: v for k, v in {**own, **changes}.items() if v is not None}
    check_broker_configs(broker.config, broker.view.broker_configs(broker.node_id),
                         r.resource_name, after)
    return {k: v for k, v in changes.items() if own.get(k) != v}


def _check_config_names(r) -> None:
    names = [c.name for c in r.configs]
    if len(set(names)) != len(names):
        raise KafkaError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")


def _apply(broker, r, incremental: bool, validate_only: bool) -> None:
    """One resource on the single node."""
    if r.resource_type == BROKER:
        changes = _broker_changes(broker, r, incremental)
        if not validate_only:
            broker.alter_broker_configs(r.resource_name, changes)
        return
    if r.resource_type == GROUP_RESOURCE:
        changes = _group_changes(broker, r, incremental)
        name = r.resource_name
        broker.metadata.alter_resource_config(
            GROUP_RESOURCE, name, changes,
            lambda new: group_config.validate(name, new, broker.config.get),
            validate_only=validate_only)
        return
    if incremental:
        changes, replace = _incremental_changes(broker, r), False
    else:
        _check_config_names(r)
        refuse_null_values(r.configs, incremental=False)
        changes, replace = {c.name: c.value for c in r.configs}, True
    name = r.resource_name
    if r.resource_type == TOPIC:
        if not broker.has_topic(name):
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        broker.alter_topic_configs(name, changes, replace=replace, validate_only=validate_only)
    elif r.resource_type == CLIENT_METRICS_RESOURCE:
        _alter_client_metrics(broker, name, changes, replace, validate_only)
    else:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"resource type {r.resource_type} is not supported")


async def _alter(ctx, req, incremental: bool, response_cls, resource_cls):
    """Both APIs: the single node applies each resource; a cluster broker checks its BROKER
    resources itself and forwards the rest, with those resolved to SET/DELETE, to the
    active controller (Kafka's preprocess, forward, reassemble)."""
    broker = ctx.broker
    answers: dict[int, tuple[int, str | None]] = {}
    forwarded = []
    for i, r in enumerate(req.resources):
        try:
            check_config_resource(ctx, AclOperation.ALTER_CONFIGS, r.resource_type,
                                  r.resource_name)
            if not broker.view.clustered:
                _apply(broker, r, incremental, req.validate_only)
            elif r.resource_type in (BROKER, GROUP_RESOURCE):
                changes = (_broker_changes(broker, r, incremental) if r.resource_type == BROKER
                           else _group_changes(broker, r, incremental))
                forwarded.append((i, _resolved(r, changes) if incremental else r))
            else:
                forwarded.append((i, r))
            answers.setdefault(i, (0, None))
        except KafkaError as e:
            answers[i] = (e.code, e.message)
    if forwarded:
        sub = type(req)(resources=[r for _, r in forwarded], validate_only=req.validate_only)
        reply = await forward(ctx, sub)
        for (i, _), got in zip(forwarded, reply.responses, strict=True):
            answers[i] = (got.error_code, got.error_message)
    out = [resource_cls(error_code=answers[i][0], error_message=answers[i][1],
                        resource_type=r.resource_type, resource_name=r.resource_name)
           for i, r in enumerate(req.resources)]
    return response_cls(throttle_time_ms=0, responses=out)


def _resolved(r, changes: dict[str, str | None]):
    """An IncrementalAlterConfigs resource whose operations are the checked result."""
    configs = [AlterableConfig(name=k, config_operation=DELETE if v is None else SET, value=v)
               for k, v in changes.items()]
    return IncrementalResource(resource_type=r.resource_type, resource_name=r.resource_name,
                               configs=configs)


@handles(33, 0, 2)
async def alter_configs(ctx, req: AlterConfigsRequest) -> AlterConfigsResponse:
    return await _alter(ctx, req, False, AlterConfigsResponse, AlterConfigsResourceResponse)


def _incremental_changes(broker, r) -> dict[str, str | None]:
    _check_config_names(r)
    refuse_null_values(r.configs, incremental=True)
    if r.resource_type == CLIENT_METRICS_RESOURCE:
        own = broker.view.resource_configs(CLIENT_METRICS_RESOURCE).get(r.resource_name, {})
        return incremental_changes(r.resource_type, own, r.configs, client_metrics.TYPES.get)
    return incremental_changes(r.resource_type, broker.view.topic_configs(r.resource_name),
                               r.configs)


def _broker_key_type(name: str) -> str | None:
    key = known_key(name)
    return None if key is None else key.type


def _broker_key_default(name: str) -> str | None:
    key = known_key(name)
    return None if key is None or key.default is None else format_value(key, key.default)


@handles(44, 0, 1)
async def incremental_alter_configs(ctx, req: IncrementalAlterConfigsRequest
                                    ) -> IncrementalAlterConfigsResponse:
    return await _alter(ctx, req, True, IncrementalAlterConfigsResponse,
                        IncrementalResourceResponse)
