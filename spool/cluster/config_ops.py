"""Config writes of the controller: AlterConfigs and IncrementalAlterConfigs -> ConfigRecords.

Resources: TOPIC (2, the topic must exist: UNKNOWN_TOPIC_OR_PARTITION), BROKER (4,
named by a broker id, or "" for the cluster-wide default; another name is
INVALID_REQUEST), CLIENT_METRICS (16, any non-empty name; its whole new set checked
by ``spool.cluster.client_metrics.validate``) and GROUP (32, any non-empty group id,
existing or not; names and values checked by ``spool.cluster.group_config.validate``,
the broker's min/max bounds by the broker that forwarded the request). Values are checked by ``spool.storage.config``'s validators
(``validate_topic_overrides``, ``validate_broker_overrides``): INVALID_CONFIG naming
the key, the value and what is allowed. Each resource gets its own error; a resource
named twice in one request is INVALID_REQUEST, as is a key named twice.

AlterConfigs replaces a resource's whole set (keys not given are deleted: a
ConfigRecord with a null value); IncrementalAlterConfigs SETs, DELETEs, APPENDs to
or SUBTRACTs from list values (current value: the resource's own, else the key's
default) one key at a time; APPEND or SUBTRACT on a key that is not a list is
INVALID_CONFIG, with Kafka's wording. A ConfigRecord is written only for a key whose
value changes. ``validate_only`` writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spool.cluster import client_metrics, group_config
from spool.cluster.client_metrics import CLIENT_METRICS_RESOURCE
from spool.cluster.group_config import GROUP_RESOURCE
from spool.cluster.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from spool.cluster.ops import ControllerResult
from spool.protocol._generated.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from spool.protocol._generated.config_record import ConfigRecord
from spool.protocol._generated.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from spool.protocol._generated.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from spool.protocol.errors import Errors, KafkaError
from spool.storage.config import (
    BROKER_CONFIGS,
    BROKER_SYNONYM_OF,
    TOPIC_CONFIGS,
    format_value,
    validate_broker_overrides,
    validate_topic_overrides,
)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _check_resource(img: MetadataImage, rtype: int, name: str) -> None:
    if rtype == TOPIC_RESOURCE:
        if name not in img.topics_by_name:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic '{name}' does not exist.")
    elif rtype == BROKER_RESOURCE:
        if name and not name.isdigit():
            raise KafkaError(Errors.INVALID_REQUEST,
                             f"Illegal non-integral BROKER resource type name: {name}")
    elif rtype not in (CLIENT_METRICS_RESOURCE, GROUP_RESOURCE):  # names checked with values
        raise KafkaError(Errors.INVALID_REQUEST, f"Unsupported resource type {rtype}")


def _validate(img: MetadataImage, rtype: int, name: str,
              changes: Mapping[str, str | None]) -> dict[str, str | None]:
    if rtype == TOPIC_RESOURCE:
        checked = validate_topic_overrides(changes)
        merged = {**img.config(rtype, name), **checked}
        validate_topic_overrides({k: v for k, v in merged.items() if v is not None})
        return checked
    if rtype == CLIENT_METRICS_RESOURCE:
        merged = {**img.config(rtype, name), **changes}
        client_metrics.validate(name, {k: v for k, v in merged.items() if v is not None})
        return dict(changes)
    if rtype == GROUP_RESOURCE:  # the broker that forwarded it checked the broker bounds
        merged = {**img.config(rtype, name), **changes}
        group_config.validate(name, {k: v for k, v in merged.items() if v is not None}, None)
        return dict(changes)
    # As Kafka's controller: a broker resource's keys were checked by the broker that
    # forwarded the request (its table of dynamic keys); values this layer knows are
    # checked again.
    return validate_broker_overrides(changes, others_checked=True)


def _records(img: MetadataImage, rtype: int, name: str,
             changes: Mapping[str, str | None]) -> list[ConfigRecord]:
    current = img.config(rtype, name)
    return [ConfigRecord(resource_type=rtype, resource_name=name, name=k, value=v)
            for k, v in changes.items() if current.get(k) != v]


def _unique(resources: list[Any]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    dup: set[tuple[int, str]] = set()
    for r in resources:
        key = (r.resource_type, r.resource_name)
        (dup if key in seen else seen).add(key)
    return dup


def _alter(img: MetadataImage, req: Any, changes_of: Any, response_cls: Any,
           resource_cls: Any) -> ControllerResult[Any]:
    dup = _unique(req.resources)
    records: list[ConfigRecord] = []
    out = []
    for r in req.resources:
        resp = resource_cls(error_code=0, error_message=None, resource_type=r.resource_type,
                            resource_name=r.resource_name)
        out.append(resp)
        try:
            if (r.resource_type, r.resource_name) in dup:
                raise KafkaError(Errors.INVALID_REQUEST, "Duplicate resource.")
            _check_resource(img, r.resource_type, r.resource_name)
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise KafkaError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")
            changes = _validate(img, r.resource_type, r.resource_name, changes_of(img, r))
            records += _records(img, r.resource_type, r.resource_name, changes)
        except KafkaError as e:
            resp.error_code, resp.error_message = e.code, e.message
    reply = response_cls(throttle_time_ms=0, responses=out)
    return ControllerResult([] if req.validate_only else records, reply)


def _replace_all(img: MetadataImage, r: Any) -> dict[str, str | None]:
    refuse_null_values(r.configs, incremental=False)
    changes: dict[str, str | None] = {k: None for k in img.config(r.resource_type,
                                                                  r.resource_name)}
    changes.update({c.name: c.value for c in r.configs})
    return changes


def alter_configs(img: MetadataImage, req: Any) -> ControllerResult[AlterConfigsResponse]:
    """AlterConfigs (an AlterConfigsRequest): replace each resource's values."""
    return _alter(img, req, _replace_all, AlterConfigsResponse, AlterConfigsResourceResponse)


def _key_info(rtype: int, name: str) -> tuple[str | None, str]:
    """(the key's type if known, its static default as a string)."""
    if rtype == TOPIC_RESOURCE:
        key = TOPIC_CONFIGS.get(name)
    elif name in BROKER_SYNONYM_OF:
        key = TOPIC_CONFIGS[BROKER_SYNONYM_OF[name][0]]
    else:
        key = BROKER_CONFIGS.get(name)
    if key is None:
        return None, ""
    return key.type, ("" if key.default is None else format_value(key, key.default))


def refuse_null_values(configs: Any, incremental: bool) -> None:
    """INVALID_REQUEST for a null value (a DELETE of IncrementalAlterConfigs aside), with
    Kafka's message (``ConfigAdminManager.preprocess``): it means "delete" nowhere else."""
    null = [c.name for c in configs
            if c.value is None and not (incremental and c.config_operation == DELETE)]
    if null:
        raise KafkaError(Errors.INVALID_REQUEST, "Null value not supported for : "
                         + ", ".join(null))


def incremental_changes(rtype: int, current: Mapping[str, str], configs: Any,
                        key_type: Any = None, key_default: Any = None
                        ) -> dict[str, str | None]:
    """The new values (None: delete) IncrementalAlterConfigs' ``configs`` make of a
    resource whose own stored values are ``current`` (Kafka's rules, both modes):

    - SET replaces, DELETE removes;
    - APPEND adds the items not there yet, SUBTRACT removes the items given (one that
      is absent changes nothing); both start from the resource's own value, else the
      key's static default (not the broker's value: Kafka's ``getParts``), and may
      leave an empty list (``cleanup.policy=""``: no cleanup, records kept forever);
    - APPEND or SUBTRACT on a key whose type is not LIST is INVALID_CONFIG, worded as
      Kafka's controller words it for a topic and its broker for a broker resource.

    ``key_type(name)`` and ``key_default(name)`` give a broker key's type and default as a
    string (the broker's table: APPEND to ``sasl.enabled.mechanisms`` starts from
    ``GSSAPI``); topic keys use
    ``TOPIC_CONFIGS``."""
    changes: dict[str, str | None] = {}
    for c in configs:
        op = c.config_operation
        if op == SET:
            changes[c.name] = c.value
        elif op == DELETE:
            changes[c.name] = None
        elif op in (APPEND, SUBTRACT):
            ktype, default = _key_info(rtype, c.name)
            if rtype != TOPIC_RESOURCE and key_type is not None:
                ktype = key_type(c.name) or ktype
            if rtype != TOPIC_RESOURCE and key_default is not None:
                default = key_default(c.name) or default
            if ktype != "list":
                verb = "APPEND" if op == APPEND else "SUBTRACT"
                if rtype in (TOPIC_RESOURCE, GROUP_RESOURCE):  # the controller's words
                    message = f"Can't {verb} to key {c.name} because its type is not LIST."
                else:
                    message = (f"Config value {verb.lower()} is not allowed for config key: "
                               f"{c.name}")
                raise KafkaError(Errors.INVALID_CONFIG, message)
            now = current.get(c.name)
            items = [s for s in (default if now is None else now).split(",") if s]
            given = [s for s in (c.value or "").split(",") if s]
            if op == APPEND:
                items += [s for s in given if s not in items]
            else:
                items = [s for s in items if s not in given]
            changes[c.name] = ",".join(items)
        else:
            raise KafkaError(Errors.INVALID_REQUEST, f"Unknown config operation {op}")
    return changes


def _incremental(img: MetadataImage, r: Any) -> dict[str, str | None]:
    refuse_null_values(r.configs, incremental=True)
    key_type = (client_metrics.TYPES.get if r.resource_type == CLIENT_METRICS_RESOURCE
                else group_config.key_type if r.resource_type == GROUP_RESOURCE else None)
    return incremental_changes(r.resource_type, img.config(r.resource_type, r.resource_name),
                               r.configs, key_type)


def incremental_alter_configs(img: MetadataImage, req: Any
                              ) -> ControllerResult[IncrementalAlterConfigsResponse]:
    """IncrementalAlterConfigs (an IncrementalAlterConfigsRequest)."""
    return _alter(img, req, _incremental, IncrementalAlterConfigsResponse,
                  IncrementalResourceResponse)
