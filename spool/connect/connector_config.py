"""A connector's configuration: Kafka Connect's common connector keys, and validation.

**Keys** (Kafka's ConnectorConfig, SourceConnectorConfig, SinkConnectorConfig; groups as
Kafka's, which ``/config/validate`` reports):

- Common: ``name``, ``connector.class``, ``tasks.max`` (1), ``tasks.max.enforce``,
  ``key.converter``, ``value.converter``, ``header.converter`` (unset: the worker's,
  with the worker's ``<which>.converter.*`` keys; set: the connector's own
  ``<which>.converter.*`` keys), ``config.action.reload``; sinks also ``topics`` and
  ``topics.regex`` (exactly one of them).
- Transforms / Predicates: ``transforms``, ``predicates`` (aliases), and for each alias
  ``transforms.<t>.type`` (required), ``.predicate``, ``.negate`` and the
  transformation's own keys, in a group ``Transforms: <t>`` (``Predicates: <p>``).
- Error Handling: ``errors.retry.timeout`` (0; -1 forever), ``errors.retry.delay.max.ms``
  (60000), ``errors.tolerance`` (none|all), ``errors.log.enable``,
  ``errors.log.include.messages``; sinks: ``errors.deadletterqueue.topic.name``,
  ``errors.deadletterqueue.topic.replication.factor`` (-1, the broker's default: Kafka's
  3 is more than a one-broker Spool has), ``errors.deadletterqueue.context.headers.enable``.
- Sources: ``topic.creation.groups`` (accepted; topics are created with the broker's
  defaults), ``exactly.once.support`` (requested|required), ``transaction.boundary``
  (poll|connector|interval), ``transaction.boundary.interval.ms``,
  ``offsets.storage.topic``.
- ``producer.override.*``, ``consumer.override.*``, ``admin.override.*``: client keys
  for the connector's clients, allowed by the worker's
  ``connector.client.config.override.policy`` (All; None: none; Principal:
  ``sasl.jaas.config``, ``sasl.mechanism``, ``security.protocol``).

**validate(props, plugins, worker) -> dict** is Kafka's ConfigInfos
(``{"name", "error_count", "groups", "configs": [{"definition", "value"}]}``; herder.py)
and never raises: an unknown ``connector.class`` is an error on ``connector.class``
(Kafka's ``Failed to find any class that implements Connector ...``); the connector's
own ``config_def()`` keys and ``validate(props)`` answers follow the common ones, then
the client overrides and the converters' keys (prefixed). ``error_count`` counts error
messages, as Kafka's. ``invalid_message(infos)`` is the 400's message create/update
answer (``Connector configuration is invalid and contains the following N
error(s):\\n...``), or None when there is no error.

**ConnectorConfig(props, plugins, worker)** parses the common keys (``ConfigError``
naming every bad one; the connector's own keys are its business) and answers ``.name``,
``.connector_class`` (as written), ``.connector_type`` (the class), ``.kind``
("source"|"sink"), ``.tasks_max``, ``.get(key)`` (typed), ``.props``;
``key_converter()``, ``value_converter()``, ``header_converter()`` (new configured
instances), ``transformation_chain()`` (``transforms.chain.TransformationChain``),
``client_overrides(role)`` (the ``<role>.override.`` keys, prefix stripped).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spool.connect import api
from spool.connect.api import (
    BOOLEAN,
    CLASS,
    HIGH,
    INT,
    LIST,
    LONG,
    LOW,
    MEDIUM,
    SHORT,
    STRING,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigValue,
    at_least,
    in_values,
)

if TYPE_CHECKING:
    from spool.connect.plugins import Plugins
    from spool.connect.worker_config import WorkerConfig

COMMON_GROUP, TRANSFORMS_GROUP, PREDICATES_GROUP = "Common", "Transforms", "Predicates"
ERROR_GROUP, EOS_GROUP = "Error Handling", "Exactly Once Support"
TOPIC_CREATION_GROUP, OFFSETS_TOPIC_GROUP = "Topic Creation", "offsets.topic"
OVERRIDE_PREFIXES = {"producer": "producer.override.", "consumer": "consumer.override.",
                     "admin": "admin.override."}
PRINCIPAL_ALLOWED = frozenset({"sasl.jaas.config", "sasl.mechanism", "security.protocol"})

# Kafka's ConfigDef.Width of the keys defined here (NONE for anything else)
_WIDTHS = {"name": "MEDIUM", "connector.class": "LONG", "tasks.max": "SHORT",
           "tasks.max.enforce": "SHORT", "key.converter": "SHORT", "value.converter": "SHORT",
           "header.converter": "SHORT", "transforms": "LONG", "predicates": "LONG",
           "config.action.reload": "MEDIUM", "errors.retry.timeout": "MEDIUM",
           "errors.retry.delay.max.ms": "MEDIUM", "errors.tolerance": "SHORT",
           "errors.log.enable": "SHORT", "errors.log.include.messages": "SHORT",
           "topics": "LONG", "topics.regex": "LONG",
           "errors.deadletterqueue.topic.name": "MEDIUM",
           "errors.deadletterqueue.topic.replication.factor": "MEDIUM",
           "errors.deadletterqueue.context.headers.enable": "MEDIUM",
           "topic.creation.groups": "LONG", "exactly.once.support": "SHORT",
           "transaction.boundary": "SHORT", "transaction.boundary.interval.ms": "SHORT",
           "offsets.storage.topic": "LONG"}


# ---- the definitions

def _non_empty(name: str, value: Any) -> None:
    if value is None or not str(value).strip():
        raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                  "String must be non-empty"]})
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in str(value)):
        raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                  "String may not contain control sequences"]})


def _unique_aliases(name: str, value: Any) -> None:
    if len(value) != len(set(value)):
        raise ConfigError({name: [f"Invalid value {','.join(value)} for configuration "
                                  f"{name}: Duplicate alias provided."]})


def _optional_at_least(low: int) -> Callable[[str, Any], None]:
    check = at_least(low)
    return lambda name, value: None if value is None else check(name, value)


def _regex(name: str, value: Any) -> None:
    if value:
        try:
            re.compile(value)
        except re.error as e:
            raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      f"{e}"]}) from None


def _class_validator(plugins: Plugins, kind: str) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        try:
            plugins.load(value, kind)
        except ConfigError:
            raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      f"Class {value} could not be found."]}) from None
    return check


def common_def(plugins: Plugins | None = None) -> ConfigDef:
    """Kafka's ConnectorConfig.configDef()."""
    conv = _class_validator(plugins, "converter") if plugins else None
    header = _class_validator(plugins, "header_converter") if plugins else None
    d = ConfigDef()
    d.define("name", STRING, importance=HIGH, validator=_non_empty,
             doc="Globally unique name to use for this connector.", group=COMMON_GROUP,
             order=1, display_name="Connector name")
    d.define("connector.class", STRING, importance=HIGH, group=COMMON_GROUP, order=2,
             display_name="Connector class",
             doc="Name or alias of the class for this connector. Must be a subclass of "
                 "org.apache.kafka.connect.connector.Connector. If the connector is "
                 "org.apache.kafka.connect.file.FileStreamSinkConnector, you can either "
                 "specify this full name,  or use \"FileStreamSink\" or "
                 "\"FileStreamSinkConnector\" to make the configuration a bit shorter")
    d.define("tasks.max", INT, 1, HIGH, "Maximum number of tasks to use for this connector.",
             validator=at_least(1), group=COMMON_GROUP, order=3, display_name="Tasks max")
    d.define("tasks.max.enforce", BOOLEAN, True, LOW,
             "(Deprecated) Whether to enforce that the tasks.max property is respected by "
             "the connector.", group=COMMON_GROUP, order=4, display_name="Enforce tasks max")
    d.define("key.converter", CLASS, None, LOW,
             "Converter class used to convert between Kafka Connect format and the "
             "serialized form that is written to Kafka.", validator=conv, group=COMMON_GROUP,
             order=5, display_name="Key converter class")
    d.define("value.converter", CLASS, None, LOW,
             "Converter class used to convert between Kafka Connect format and the "
             "serialized form that is written to Kafka.", validator=conv, group=COMMON_GROUP,
             order=6, display_name="Value converter class")
    d.define("header.converter", CLASS, None, LOW,
             "HeaderConverter class used to convert between Kafka Connect format and the "
             "serialized form that is written to Kafka.", validator=header,
             group=COMMON_GROUP, order=7, display_name="Header converter class")
    d.define("transforms", LIST, [], LOW, "Aliases for the transformations to be applied "
             "to records.", validator=_unique_aliases, group=TRANSFORMS_GROUP, order=8,
             display_name="Transforms")
    d.define("predicates", LIST, [], LOW, "Aliases for the predicates used by "
             "transformations.", validator=_unique_aliases, group=PREDICATES_GROUP, order=9,
             display_name="Predicates")
    d.define("config.action.reload", STRING, "restart", LOW,
             "The action that Connect should take on the connector when changes in external "
             "configuration providers result in a change in the connector's configuration "
             "properties.", validator=in_values("none", "restart"), group=COMMON_GROUP,
             order=10, display_name="Reload Action")
    d.define("errors.retry.timeout", LONG, 0, MEDIUM,
             "The maximum duration in milliseconds that a failed operation will be "
             "reattempted. The default is 0, which means no retries will be attempted. Use "
             "-1 for infinite retries.", group=ERROR_GROUP, order=1,
             display_name="Retry Timeout for Errors")
    d.define("errors.retry.delay.max.ms", LONG, 60000, MEDIUM,
             "The maximum duration in milliseconds between consecutive retry attempts.",
             group=ERROR_GROUP, order=2,
             display_name="Maximum Delay Between Retries for Errors")
    d.define("errors.tolerance", STRING, "none", MEDIUM,
             "Behavior for tolerating errors during connector operation. 'none' is the "
             "default value and signals that any error will result in an immediate connector "
             "task failure; 'all' changes the behavior to skip over problematic records.",
             validator=in_values("none", "all"), group=ERROR_GROUP, order=3,
             display_name="Error Tolerance")
    d.define("errors.log.enable", BOOLEAN, False, MEDIUM,
             "If true, write each error and the details of the failed operation and "
             "problematic record to the Connect application log.", group=ERROR_GROUP,
             order=4, display_name="Log Errors")
    d.define("errors.log.include.messages", BOOLEAN, False, MEDIUM,
             "Whether to include in the log the Connect record that resulted in a failure.",
             group=ERROR_GROUP, order=5, display_name="Log Error Details")
    return d


def sink_def(plugins: Plugins | None = None) -> ConfigDef:
    """Kafka's SinkConnectorConfig.configDef()."""
    d = common_def(plugins)
    d.define("topics", LIST, "", HIGH, "List of topics to consume, separated by commas",
             group=COMMON_GROUP, order=4, display_name="Topics")
    d.define("topics.regex", STRING, "", HIGH, "Regular expression giving topics to consume. "
             "Only one of topics or topics.regex should be specified.", validator=_regex,
             group=COMMON_GROUP, order=4, display_name="Topics regex")
    d.define("errors.deadletterqueue.topic.name", STRING, "", MEDIUM,
             "The name of the topic to be used as the dead letter queue (DLQ) for messages "
             "that result in an error when processed by this sink connector, or its "
             "transformations or converters. The topic name is blank by default, which means "
             "that no messages are to be recorded in the DLQ.", group=ERROR_GROUP, order=6,
             display_name="Dead Letter Queue Topic Name")
    d.define("errors.deadletterqueue.topic.replication.factor", SHORT, -1, MEDIUM,
             "Replication factor used to create the dead letter queue topic when it doesn't "
             "already exist (-1: the broker's default).", group=ERROR_GROUP, order=7,
             display_name="Dead Letter Queue Topic Replication Factor")
    d.define("errors.deadletterqueue.context.headers.enable", BOOLEAN, False, MEDIUM,
             "If true, add headers containing error context to the messages written to the "
             "dead letter queue. To avoid clashing with headers from the original record, "
             "all error context header keys will start with __connect.errors.",
             group=ERROR_GROUP, order=8, display_name="Enable Error Context Headers")
    return d


def source_def(plugins: Plugins | None = None) -> ConfigDef:
    """Kafka's SourceConnectorConfig.configDef()."""
    d = common_def(plugins)
    d.define("topic.creation.groups", LIST, [], LOW, "Groups of configurations for topics "
             "created by source connectors", validator=_unique_aliases,
             group=TOPIC_CREATION_GROUP, order=1, display_name="Topic Creation Groups")
    d.define("exactly.once.support", STRING, "requested", MEDIUM,
             "Permitted values are requested, required. If set to \"required\", forces a "
             "preflight check for the connector to ensure that it can provide exactly-once "
             "semantics with the given configuration.",
             validator=in_values("requested", "required"), group=EOS_GROUP, order=2,
             display_name="Exactly once support")
    d.define("transaction.boundary", STRING, "poll", MEDIUM,
             "Permitted values are: poll, interval, connector. If set to 'poll', a new "
             "producer transaction will be started and committed for every batch of records "
             "that each task from this connector provides to Connect.",
             validator=in_values("poll", "interval", "connector"), group=EOS_GROUP, order=3,
             display_name="Transaction Boundary")
    d.define("transaction.boundary.interval.ms", LONG, None, LOW,
             "If 'transaction.boundary' is set to 'interval', determines the interval for "
             "producer transaction commits by connector tasks. If unset, defaults to the "
             "value of the worker-level 'offset.flush.interval.ms' property.",
             validator=_optional_at_least(0), group=EOS_GROUP, order=4,
             display_name="Transaction boundary interval")
    d.define("offsets.storage.topic", STRING, None, LOW,
             "The name of a separate offsets topic to use for this connector. If empty or "
             "not specified, the worker's global offsets topic name will be used.",
             validator=lambda n, v: None if v is None else _non_empty(n, v),
             group=OFFSETS_TOPIC_GROUP, order=1, display_name="Offsets topic")
    return d


def _enrich(base: ConfigDef, props: dict[str, str], plugins: Plugins,
            errors: dict[str, list[str]]) -> ConfigDef:
    """Kafka's ConnectorConfig.enrich: each transform's and predicate's keys, prefixed.
    Problems found on the way (an unknown type) go to ``errors``."""
    d = ConfigDef(base.keys.values())
    for alias_key, kind, group in (("transforms", "transformation", TRANSFORMS_GROUP),
                                   ("predicates", "predicate", PREDICATES_GROUP)):
        aliases = api.parse_value(base.keys[alias_key], props.get(alias_key, "")) \
            if props.get(alias_key) else []
        label = "Transformation" if kind == "transformation" else "Predicate"
        for alias in dict.fromkeys(aliases):
            prefix = f"{alias_key}.{alias}."
            g = f"{group}: {alias}"
            d.keys[prefix + "type"] = ConfigKey(
                prefix + "type", CLASS, api.REQUIRED, HIGH,
                f"Class for the '{alias}' {kind}.", group=g, order=0,
                display_name=f"{label} type for {alias}")
            type_name = props.get(prefix + "type")
            plugin_def = ConfigDef()
            if type_name:
                try:
                    plugin_def = plugins.load(type_name, kind)().config_def()
                except ConfigError as e:
                    errors.setdefault(prefix + "type", []).append(
                        f"Invalid value {type_name} for configuration {prefix}type: "
                        f"{_first(e)}")
                except Exception as e:  # noqa: BLE001 - a plugin that cannot be built
                    errors.setdefault(prefix + "type", []).append(
                        f"Invalid value {type_name} for configuration {prefix}type: Error "
                        f"getting config definition from {label}: {e}")
            order = 1
            if kind == "transformation":
                d.keys[prefix + "predicate"] = ConfigKey(
                    prefix + "predicate", STRING, None, MEDIUM, "The alias of a predicate "
                    "used to determine whether to apply this transformation.", group=g,
                    order=1)
                d.keys[prefix + "negate"] = ConfigKey(
                    prefix + "negate", BOOLEAN, False, MEDIUM,
                    "Whether the configured predicate should be negated.", group=g, order=2)
                order = 3
                if prefix + "negate" in props and prefix + "predicate" not in props:
                    errors.setdefault(prefix + "type", []).append(
                        f"Config '{prefix}negate' was provided but there is no config "
                        f"'{prefix}predicate' defining a predicate to be negated.")
                predicate = props.get(prefix + "predicate")
                declared = api.parse_value(base.keys["predicates"], props.get("predicates", ""))
                if predicate and predicate not in declared:
                    errors.setdefault(prefix + "predicate", []).append(
                        f"Invalid value {predicate} for configuration {prefix}predicate: "
                        f"not one of the aliases in predicates ({', '.join(declared)})")
            for key in plugin_def.keys.values():
                if kind == "transformation" and key.name in ("predicate", "negate"):
                    continue
                d.keys[prefix + key.name] = ConfigKey(
                    prefix + key.name, key.type, key.default, key.importance, key.doc,
                    key.validator, g, order, key.display_name, key.recommended)
                order += 1
    return d


def _first(e: ConfigError) -> str:
    return next((m for ms in e.errors.values() for m in ms), str(e))


# ---- ConfigInfos

def _to_string(value: Any, type_: str | None) -> str | None:
    """Kafka's ConfigDef.convertToString."""
    if value is None or value is api.REQUIRED:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if type_ == "PASSWORD":
        return "[hidden]"
    return str(value)


def definition(key: ConfigKey, prefix: str = "") -> dict[str, Any]:
    """Kafka's ConfigKeyInfo: what ``/config/validate`` and ``/connector-plugins/{p}/config``
    report of a key."""
    return {"name": prefix + key.name, "type": key.type, "required": key.required,
            "default_value": None if key.required else _to_string(key.default, key.type),
            "importance": key.importance, "documentation": key.doc, "group": key.group,
            "width": _WIDTHS.get(key.name, "NONE"),
            "display_name": key.display_name or prefix + key.name,
            "dependents": [], "order": key.order}


def _value(cv: ConfigValue, type_: str | None, prefix: str = "") -> dict[str, Any]:
    return {"name": prefix + cv.name, "value": _to_string(cv.value, type_),
            "recommended_values": [str(v) for v in cv.recommended_values],
            "errors": list(cv.errors), "visible": cv.visible}


def _groups(keys: dict[str, ConfigKey]) -> list[str]:
    return list(dict.fromkeys(k.group for k in keys.values() if k.group))


def validate(props: dict[str, str], plugins: Plugins, worker: WorkerConfig) -> dict[str, Any]:
    """Kafka's ConfigInfos for ``props`` (module doc); never raises: a plugin failing in an
    unexpected way is an error on ``connector.class``."""
    try:
        return _validate(props, plugins, worker)
    except Exception as e:  # noqa: BLE001 - a plugin's bug; the answer says so
        cv = ConfigValue("connector.class", props.get("connector.class"),
                         errors=[_unexpected(e)])
        return {"name": props.get("connector.class"), "error_count": 1,
                "groups": [COMMON_GROUP],
                "configs": [{"definition": definition(common_def().keys["connector.class"]),
                             "value": _value(cv, STRING)}]}


def _validate(props: dict[str, str], plugins: Plugins, worker: WorkerConfig) -> dict[str, Any]:
    connector_class = props.get("connector.class")
    connector: api.Connector | None = None
    class_error: str | None = None
    if connector_class:
        try:
            connector = plugins.load(connector_class, "connector")()
        except ConfigError as e:
            class_error = _first(e)
        except Exception as e:  # noqa: BLE001 - a connector that cannot be built
            class_error = f"Failed to instantiate {connector_class}: {e}"
    kind = connector.kind if connector is not None else ""
    base = source_def(plugins) if kind == "source" else sink_def(plugins) \
        if kind == "sink" else common_def(plugins)
    extra: dict[str, list[str]] = {}
    d = _enrich(base, props, plugins, extra)
    values = d.validate(props)
    for name, msgs in extra.items():
        values.setdefault(name, ConfigValue(name, props.get(name))).errors.extend(msgs)
    if class_error:
        values["connector.class"].errors.append(class_error)
    if kind == "sink":
        _validate_sink(props, values, worker)
    elif kind == "source" and connector is not None:
        _validate_source(props, values, worker, connector)  # type: ignore[arg-type]

    keys = dict(d.keys)
    groups = _groups(keys)
    configs_extra: list[dict[str, Any]] = []
    if connector is not None:
        own, own_values = _connector_validation(connector, props, values)
        for name, key in own.keys.items():
            keys.setdefault(name, key)
        for g in _groups(own.keys):
            if g not in groups:
                groups.append(g)
        for name, cv in own_values.items():
            if name in values and name not in own.keys:
                values[name].errors.extend(e for e in cv.errors if e not in values[name].errors)
            else:
                values[name] = cv
    for name, v in props.items():  # after the connector's own: its keys too
        if v is None:
            values.setdefault(name, ConfigValue(name)).errors.append(
                "Null value can not be supplied as the configuration value.")
    error_count = 0
    configs: list[dict[str, Any]] = []
    for name, cv in values.items():  # values without a key first, as Kafka's
        if name not in keys:
            configs.append({"definition": None, "value": _value(cv, None)})
            error_count += len(cv.errors)
    for name, key in keys.items():
        # a connector's validate() may leave out some of its keys: their defaults, so
        # that every entry has a value (readers of the answer need not check for null)
        cv = values.get(name) or ConfigValue(
            name, None if key.required else key.default, list(key.recommended))
        configs.append({"definition": definition(key), "value": _value(cv, key.type)})
        error_count += len(cv.errors)
    for infos in (_overrides(props, worker, kind), _converters(props, plugins, values)):
        for entry in infos:
            configs_extra.append(entry)
            error_count += bool(entry["value"]["errors"])
            g = (entry["definition"] or {}).get("group")
            if g and g not in groups:
                groups.append(g)
    return {"name": connector_class, "error_count": error_count, "groups": groups,
            "configs": configs + configs_extra}


def _connector_validation(connector: api.Connector, props: dict[str, str],
                          values: dict[str, ConfigValue]
                          ) -> tuple[ConfigDef, dict[str, ConfigValue]]:
    """The connector's config_def() and validate(props); a failure is an error on
    connector.class."""
    try:
        own = connector.config_def() or ConfigDef()
        own_values = connector.validate(dict(props)) or {}
        return own, own_values
    except Exception as e:  # noqa: BLE001 - the plugin's bug, reported as an error
        message = str(e).strip()
        values["connector.class"].errors.append(
            "An unexpected error occurred during validation" +
            (f": {message}" if message else "; please see the worker logs for more details."))
        return ConfigDef(), {}


def _validate_sink(props: dict[str, str], values: dict[str, ConfigValue],
                   worker: WorkerConfig) -> None:
    """Kafka's SinkConnectorConfig.validate and the worker group check."""
    topics = (props.get("topics") or "").strip()
    regex = (props.get("topics.regex") or "").strip()
    dlq = (props.get("errors.deadletterqueue.topic.name") or "").strip()

    def add(name: str, message: str) -> None:
        values.setdefault(name, ConfigValue(name, props.get(name))).errors.append(message)

    if topics and regex:
        message = "topics and topics.regex are mutually exclusive options, but both are set."
        add("topics", message)
        add("topics.regex", message)
    if not topics and not regex:
        message = "Must configure one of topics or topics.regex"
        add("topics", message)
        add("topics.regex", message)
    if dlq:
        listed = [t.strip() for t in topics.split(",") if t.strip()]
        if dlq in listed:
            add("topics", f"The DLQ topic '{dlq}' may not be included in the list of topics "
                          f"('topics=[{', '.join(listed)}]') consumed by the connector")
        if regex and not values["topics.regex"].errors and re.fullmatch(regex, dlq):
            add("topics.regex", f"The DLQ topic '{dlq}' may not be matched by the regex for "
                                f"the topics ('topics.regex={regex}') consumed by the "
                                "connector")
    group_id = None if worker.standalone else worker.get("group.id")
    name = props.get("name")
    if group_id is not None:
        override = props.get("consumer.override.group.id")
        if override is not None and override == group_id:
            add("consumer.override.group.id", f"Consumer group {override} conflicts with "
                                              f"Connect worker group {group_id}")
        elif override is None and name and f"connect-{name}" == group_id:
            add("name", f"Consumer group for sink connector named {name} conflicts with "
                        f"Connect worker group {group_id}")


def _validate_source(props: dict[str, str], values: dict[str, ConfigValue],
                     worker: WorkerConfig, connector: api.SourceConnector) -> None:
    """Kafka's exactly-once and transaction-boundary preflight checks (DistributedHerder)."""
    eos = values["exactly.once.support"]
    if not eos.errors and str(eos.value).lower() == "required":
        if worker.standalone or worker.get("exactly.once.source.support") != "enabled":
            eos.errors.append("This worker does not have exactly-once source support enabled.")
        try:
            support = connector.exactly_once_support(dict(props))
            if support is None:
                eos.errors.append(
                    "The connector does not implement the API required for preflight "
                    "validation of exactly-once source support. Please consult the "
                    "documentation for the connector to determine whether it supports "
                    "exactly-once semantics, and then consider reconfiguring the connector to "
                    "use the value \"requested\" for this property (which will disable this "
                    "preflight check and allow the connector to be created).")
            elif support != api.ExactlyOnceSupport.SUPPORTED:
                eos.errors.append("The connector does not support exactly-once semantics with "
                                  "the provided configuration.")
        except Exception as e:  # noqa: BLE001
            eos.errors.append(_unexpected(e))
    boundary = values["transaction.boundary"]
    if not boundary.errors and str(boundary.value).lower() == "connector":
        try:
            if not connector.can_define_transaction_boundaries(dict(props)):
                boundary.errors.append(
                    "The connector does not support connector-defined transaction boundaries "
                    "with the given configuration. Please reconfigure it to use a different "
                    "transaction boundary definition.")
        except Exception as e:  # noqa: BLE001
            boundary.errors.append(_unexpected(e))


def _unexpected(e: Exception) -> str:
    message = str(e).strip()
    return "An unexpected error occurred during validation" + (
        f": {message}" if message else "; please see the worker logs for more details.")


def _overrides(props: dict[str, str], worker: WorkerConfig, kind: str) -> list[dict[str, Any]]:
    """Kafka's validateClientOverrides under the worker's policy; one entry per key given."""
    policy = worker.get("connector.client.config.override.policy") or "All"
    uses = {"producer": kind == "source" or bool(props.get("errors.deadletterqueue.topic.name")),
            "consumer": kind == "sink",
            "admin": kind == "source" or bool(props.get("errors.deadletterqueue.topic.name"))}
    out = []
    for role, prefix in OVERRIDE_PREFIXES.items():
        if not uses[role]:
            continue
        for name in sorted(k for k in props if k.startswith(prefix)):
            key = name[len(prefix):]
            errors = []
            if policy.lower() == "none" or (policy.lower() == "principal"
                                            and key not in PRINCIPAL_ALLOWED):
                errors.append(f"The '{policy}' policy does not allow '{key}' to be overridden "
                              "in the connector configuration.")
            out.append({"definition": None,
                        "value": {"name": name, "value": props[name], "recommended_values": [],
                                  "errors": errors, "visible": True}})
    return out


def _converters(props: dict[str, str], plugins: Plugins,
                values: dict[str, ConfigValue]) -> list[dict[str, Any]]:
    """The connector's own converters' keys, validated by their config_def (Kafka's
    validateConverterConfig), prefixed ``<which>.converter.``."""
    out = []
    for key, kind in (("header.converter", "header_converter"), ("key.converter", "converter"),
                      ("value.converter", "converter")):
        cls_name = props.get(key)
        if not cls_name or values[key].errors:
            continue
        try:
            instance = plugins.load(cls_name, kind)()
            # a converter without config_def() has no keys to check (Kafka: a null ConfigDef)
            conv_def = instance.config_def() if hasattr(instance, "config_def") else None
        except Exception as e:  # noqa: BLE001 - reported on the key, as Kafka
            values[key].errors.append(f"Failed to load ConfigDef from {kind.replace('_', ' ')}"
                                      f": {e}")
            continue
        if not conv_def or not conv_def.keys:
            continue
        prefix = key + "."
        own = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}
        if "converter.type" in conv_def.keys:
            own.setdefault("converter.type", key.split(".")[0])
        for name, cv in conv_def.validate(own).items():
            out.append({"definition": definition(conv_def.keys[name], prefix),
                        "value": _value(cv, conv_def.keys[name].type, prefix)})
    return out


def invalid_message(infos: dict[str, Any]) -> str | None:
    """The 400 answer's message to a create/update with errors (Kafka's wording)."""
    n = infos["error_count"]
    if not n:
        return None
    lines = [f"Connector configuration is invalid and contains the following {n} error(s):"]
    for entry in infos["configs"]:
        lines.extend((entry["value"] or {}).get("errors") or [])
    lines.append("You can also find the above list of errors at the endpoint "
                 "`/connector-plugins/{connectorType}/config/validate`")
    return "\n".join(lines)


# ---- the parsed configuration

class ConnectorConfig:
    """A connector's common keys, parsed (module doc)."""

    def __init__(self, props: dict[str, str], plugins: Plugins, worker: WorkerConfig) -> None:
        self.props = dict(props)
        self.plugins = plugins
        self.worker = worker
        name = props.get("connector.class")
        if not name:
            raise ConfigError({"connector.class": [
                'Missing required configuration "connector.class" which has no default '
                'value.']})
        self.connector_type: type[api.Connector] = plugins.load(name, "connector")
        self.kind: str = self.connector_type.kind
        base = source_def(plugins) if self.kind == "source" else sink_def(plugins)
        errors: dict[str, list[str]] = {}
        definition_ = _enrich(base, self.props, plugins, errors)
        values = definition_.validate(self.props)
        if self.kind == "sink":
            _validate_sink(self.props, values, worker)
        for n, cv in values.items():
            if cv.errors:
                errors.setdefault(n, []).extend(cv.errors)
        if errors:
            raise ConfigError(errors)
        self._values = {n: cv.value if n in self.props or cv.value is None
                        or definition_.keys.get(n) is None
                        else api.parse_value(definition_.keys[n], cv.value)
                        for n, cv in values.items()}

    @property
    def name(self) -> str:
        return self._values["name"]

    @property
    def connector_class(self) -> str:
        return self.props["connector.class"]

    @property
    def tasks_max(self) -> int:
        return self._values["tasks.max"]

    def get(self, key: str) -> Any:
        if key in self._values:
            return self._values[key]
        return self.props.get(key)

    def _converter_class_and_props(self, which: str) -> tuple[str, dict[str, str]]:
        key = f"{which}.converter"
        if self.props.get(key):
            prefix = key + "."
            return self.props[key], {k[len(prefix):]: v for k, v in self.props.items()
                                     if k.startswith(prefix)}
        return self.worker.get(key), self.worker.converter_config(which)

    def key_converter(self) -> api.Converter:
        from spool.connect import converters
        cls, props = self._converter_class_and_props("key")
        return converters.make(self.plugins, cls, props, True)

    def value_converter(self) -> api.Converter:
        from spool.connect import converters
        cls, props = self._converter_class_and_props("value")
        return converters.make(self.plugins, cls, props, False)

    def header_converter(self) -> api.HeaderConverter:
        from spool.connect import converters
        cls, props = self._converter_class_and_props("header")
        return converters.make_header(self.plugins, cls, props)

    def transformation_chain(self) -> Any:
        from spool.connect.transforms.chain import TransformationChain
        return TransformationChain.from_config(self.props, self.plugins)

    def client_overrides(self, role: str) -> dict[str, str]:
        """The ``<role>.override.*`` keys, prefix stripped (validation checked the policy)."""
        prefix = OVERRIDE_PREFIXES[role]
        return {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}

    def __repr__(self) -> str:
        return f"ConnectorConfig({self.props.get('name')}, {self.connector_class})"


__all__ = ["ConnectorConfig", "validate", "invalid_message", "definition", "common_def",
           "sink_def", "source_def"]
