"""Connector configs: Kafka's common keys, ConfigInfos validation, converters, overrides."""

from __future__ import annotations

import pytest

from spool.connect import api
from spool.connect.connector_config import ConnectorConfig, invalid_message, validate
from spool.connect.plugins import Plugins
from spool.connect.worker_config import WorkerConfig


class CountingTask(api.SourceTask):
    def start(self, props):
        pass

    def poll(self):
        return []


class CountingSource(api.SourceConnector):
    def start(self, props):
        self.props = props

    def task_class(self):
        return CountingTask

    def task_configs(self, max_tasks):
        return [dict(self.props) for _ in range(max_tasks)]

    def config_def(self):
        return api.ConfigDef().define("count.to", api.LONG, importance=api.HIGH,
                                      doc="How far to count", group="Counting",
                                      validator=api.at_least(1))


class EosSource(CountingSource):
    def exactly_once_support(self, props):
        return api.ExactlyOnceSupport.SUPPORTED


class NullSink(api.SinkConnector):
    def start(self, props):
        pass

    def task_class(self):
        return api.SinkTask

    def task_configs(self, max_tasks):
        return [{}]


class Broken(NullSink):
    def config_def(self):
        return api.ConfigDef().define("x", api.INT, 1, validator=self._explode)

    @staticmethod
    def _explode(name, value):
        raise RuntimeError("the plugin's bug")


class Terse(NullSink):
    """Its validate() answers only some of its keys."""

    def config_def(self):
        return api.ConfigDef().define("a", api.INT, 7).define("b", api.STRING, "x")

    def validate(self, props):
        return {"a": api.ConfigValue("a", 1)}


class Upper(api.Transformation):
    def config_def(self):
        return api.ConfigDef().define("field", api.STRING, importance=api.HIGH, doc="A field")

    def apply(self, record):
        return record


class Always(api.Predicate):
    def test(self, record):
        return True


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    p = Plugins.discover()
    for klass in (CountingSource, EosSource, NullSink, Broken, Terse, Upper, Always):
        p.register(f"test.{klass.__name__}", klass)
    return p


def _worker(**extra: str) -> WorkerConfig:
    return WorkerConfig.from_props({
        "bootstrap.servers": "127.0.0.1:9092", "group.id": "connect-cluster",
        "config.storage.topic": "c", "offset.storage.topic": "o", "status.storage.topic": "s",
        "value.converter.schemas.enable": "false", **extra}, standalone=False)


def _by_name(infos):
    return {c["value"]["name"]: c for c in infos["configs"] if c["value"] is not None}


def test_a_valid_source_config_validates_with_kafkas_groups_and_definitions(plugins):
    infos = validate({"name": "count", "connector.class": "CountingSource", "tasks.max": "2",
                      "count.to": "10"}, plugins, _worker())
    assert infos["name"] == "CountingSource"
    assert infos["error_count"] == 0
    assert infos["groups"][:4] == ["Common", "Transforms", "Predicates", "Error Handling"]
    assert "Exactly Once Support" in infos["groups"] and infos["groups"][-1] == "Counting"
    configs = _by_name(infos)
    assert configs["tasks.max"]["definition"] == {
        "name": "tasks.max", "type": "INT", "required": False, "default_value": "1",
        "importance": "HIGH", "documentation": "Maximum number of tasks to use for this "
        "connector.", "group": "Common", "width": "SHORT", "display_name": "Tasks max",
        "dependents": [], "order": 3}
    assert configs["tasks.max"]["value"] == {"name": "tasks.max", "value": "2",
                                             "recommended_values": [], "errors": [],
                                             "visible": True}
    assert configs["name"]["definition"]["required"] is True
    assert configs["count.to"]["value"]["value"] == "10"
    assert configs["exactly.once.support"]["value"]["value"] == "requested"
    assert invalid_message(infos) is None


def test_missing_required_wrong_types_and_unknown_class_are_errors(plugins):
    infos = validate({"connector.class": "CountingSource", "tasks.max": "many",
                      "errors.tolerance": "some"}, plugins, _worker())
    configs = _by_name(infos)
    assert configs["name"]["value"]["errors"] == [
        'Missing required configuration "name" which has no default value.']
    assert configs["tasks.max"]["value"]["errors"] == [
        "Invalid value many for configuration tasks.max: Not a number of type INT"]
    assert configs["errors.tolerance"]["value"]["errors"] == [
        "Invalid value some for configuration errors.tolerance: String must be one of: "
        "none, all"]
    assert configs["count.to"]["value"]["errors"] == [
        'Missing required configuration "count.to" which has no default value.']
    assert infos["error_count"] == 4
    message = invalid_message(infos)
    assert message.startswith(
        "Connector configuration is invalid and contains the following 4 error(s):\n")
    assert 'Missing required configuration "name" which has no default value.' in message
    assert message.endswith("You can also find the above list of errors at the endpoint "
                            "`/connector-plugins/{connectorType}/config/validate`")

    unknown = validate({"name": "x", "connector.class": "NoSuchConnector"}, plugins, _worker())
    errors = _by_name(unknown)["connector.class"]["value"]["errors"]
    assert len(errors) == 1 and errors[0].startswith(
        "Failed to find any class that implements Connector and which name matches "
        "NoSuchConnector, available connectors are: ")
    assert unknown["error_count"] == 1
    assert unknown["groups"] == ["Common", "Transforms", "Predicates", "Error Handling"]


def test_sinks_need_exactly_one_of_topics_and_topics_regex(plugins):
    worker = _worker()
    neither = _by_name(validate({"name": "s", "connector.class": "NullSink"}, plugins, worker))
    assert neither["topics"]["value"]["errors"] == [
        "Must configure one of topics or topics.regex"]
    assert neither["topics.regex"]["value"]["errors"] == [
        "Must configure one of topics or topics.regex"]
    both = validate({"name": "s", "connector.class": "NullSink", "topics": "a",
                     "topics.regex": "a.*"}, plugins, worker)
    assert both["error_count"] == 2
    assert _by_name(both)["topics"]["value"]["errors"] == [
        "topics and topics.regex are mutually exclusive options, but both are set."]
    dlq = _by_name(validate({"name": "s", "connector.class": "NullSink", "topics": "a,dlq",
                             "errors.deadletterqueue.topic.name": "dlq"}, plugins, worker))
    assert dlq["topics"]["value"]["errors"] == [
        "The DLQ topic 'dlq' may not be included in the list of topics ('topics=[a, dlq]') "
        "consumed by the connector"]
    clash = _by_name(validate({"name": "cluster", "connector.class": "NullSink",
                               "topics": "a"}, plugins, _worker(**{"group.id": "connect-cluster"})))
    assert clash["name"]["value"]["errors"] == [
        "Consumer group for sink connector named cluster conflicts with Connect worker group "
        "connect-cluster"]
    ok = validate({"name": "s", "connector.class": "NullSink", "topics.regex": "orders-.*"},
                  plugins, worker)
    assert ok["error_count"] == 0


def test_exactly_once_required_needs_the_worker_and_the_connector(plugins):
    props = {"name": "c", "count.to": "5", "exactly.once.support": "required"}
    off = _by_name(validate({**props, "connector.class": "EosSource"}, plugins, _worker()))
    assert off["exactly.once.support"]["value"]["errors"] == [
        "This worker does not have exactly-once source support enabled."]
    enabled = _worker(**{"exactly.once.source.support": "enabled"})
    assert validate({**props, "connector.class": "EosSource"}, plugins, enabled)[
        "error_count"] == 0
    unknown = _by_name(validate({**props, "connector.class": "CountingSource"}, plugins,
                                enabled))
    assert unknown["exactly.once.support"]["value"]["errors"][0].startswith(
        "The connector does not implement the API required for preflight validation of "
        "exactly-once source support.")
    boundary = _by_name(validate({**props, "connector.class": "EosSource",
                                  "transaction.boundary": "connector"}, plugins, enabled))
    assert boundary["transaction.boundary"]["value"]["errors"] == [
        "The connector does not support connector-defined transaction boundaries with the "
        "given configuration. Please reconfigure it to use a different transaction boundary "
        "definition."]


def test_transforms_and_predicates_are_enriched_with_their_keys(plugins):
    props = {"name": "c", "connector.class": "CountingSource", "count.to": "3",
             "transforms": "up,bad", "transforms.up.type": "test.Upper",
             "transforms.up.predicate": "always", "predicates": "always",
             "predicates.always.type": "test.Always", "transforms.bad.type": "NoSuchSMT"}
    infos = validate(props, plugins, _worker())
    configs = _by_name(infos)
    assert configs["transforms.up.field"]["value"]["errors"] == [
        'Missing required configuration "transforms.up.field" which has no default value.']
    assert configs["transforms.up.field"]["definition"]["group"] == "Transforms: up"
    assert configs["transforms.bad.type"]["value"]["errors"][0] == (
        "Invalid value NoSuchSMT for configuration transforms.bad.type: Class NoSuchSMT "
        "could not be found.")
    assert "Transforms: up" in infos["groups"] and "Predicates: always" in infos["groups"]
    assert infos["error_count"] == 2
    dangling = _by_name(validate({**props, "transforms": "up", "predicates": "",
                                  "transforms.up.field": "f"}, plugins, _worker()))
    assert dangling["transforms.up.predicate"]["value"]["errors"] == [
        "Invalid value always for configuration transforms.up.predicate: not one of the "
        "aliases in predicates ()"]


def test_converters_keys_are_validated_and_overrides_follow_the_policy(plugins):
    props = {"name": "c", "connector.class": "CountingSource", "count.to": "3",
             "value.converter": "JsonConverter", "value.converter.decimal.format": "HEX",
             "key.converter": "NoSuchConverter", "producer.override.linger.ms": "5",
             "producer.override.sasl.mechanism": "PLAIN"}
    infos = validate(props, plugins, _worker())
    configs = _by_name(infos)
    assert configs["key.converter"]["value"]["errors"] == [
        "Invalid value NoSuchConverter for configuration key.converter: Class "
        "NoSuchConverter could not be found."]
    assert configs["value.converter.decimal.format"]["value"]["errors"] == [
        "Invalid value HEX for configuration decimal.format: String must be one of: "
        "BASE64, NUMERIC"]
    assert configs["producer.override.linger.ms"]["value"]["errors"] == []
    assert infos["error_count"] == 2
    principal = _by_name(validate(props, plugins, _worker(
        **{"connector.client.config.override.policy": "Principal"})))
    assert principal["producer.override.linger.ms"]["value"]["errors"] == [
        "The 'Principal' policy does not allow 'linger.ms' to be overridden in the connector "
        "configuration."]
    assert principal["producer.override.sasl.mechanism"]["value"]["errors"] == []


def test_connector_config_parses_and_builds_converters(plugins):
    worker = _worker()
    cfg = ConnectorConfig({"name": "c", "connector.class": "CountingSource", "count.to": "3",
                           "tasks.max": "4", "errors.tolerance": "all",
                           "key.converter": "StringConverter",
                           "producer.override.linger.ms": "5"}, plugins, worker)
    assert (cfg.name, cfg.connector_class, cfg.kind, cfg.tasks_max) == (
        "c", "CountingSource", "source", 4)
    assert cfg.connector_type is CountingSource
    assert cfg.get("errors.tolerance") == "all"
    assert cfg.get("errors.retry.delay.max.ms") == 60000
    assert cfg.get("transforms") == []
    assert cfg.client_overrides("producer") == {"linger.ms": "5"}
    assert cfg.client_overrides("consumer") == {}
    assert type(cfg.key_converter()).__name__ == "StringConverter"
    value = cfg.value_converter()  # the worker's, with the worker's schemas.enable=false
    assert type(value).__name__ == "JsonConverter" and value.schemas_enable is False
    assert value.from_connect_data("t", None, None, {"a": 1}) == b'{"a":1}'
    assert type(cfg.header_converter()).__name__ == "SimpleHeaderConverter"

    sink = ConnectorConfig({"name": "s", "connector.class": "NullSink", "topics": "a, b"},
                           plugins, worker)
    assert sink.kind == "sink" and sink.get("topics") == ["a", "b"]
    assert sink.get("errors.deadletterqueue.topic.replication.factor") == -1

    with pytest.raises(api.ConfigError) as e:
        ConnectorConfig({"name": "s", "connector.class": "NullSink", "tasks.max": "0"},
                        plugins, worker)
    assert set(e.value.errors) == {"tasks.max", "topics", "topics.regex"}
    with pytest.raises(api.ConfigError, match="Failed to find any class"):
        ConnectorConfig({"name": "s", "connector.class": "Nope"}, plugins, worker)


def test_validation_never_raises_for_a_broken_plugin(plugins):
    infos = validate({"name": "b", "connector.class": "test.Broken", "topics": "t", "x": "2"},
                     plugins, _worker())
    assert infos["error_count"] == 1
    assert _by_name(infos)["connector.class"]["value"]["errors"] == [
        "An unexpected error occurred during validation: the plugin's bug"]


def test_every_key_has_a_value_even_when_the_connector_leaves_some_out(plugins):
    infos = validate({"name": "t", "connector.class": "test.Terse", "topics": "t"}, plugins,
                     _worker())
    assert all(c["value"] is not None for c in infos["configs"])
    configs = _by_name(infos)
    assert configs["a"]["value"]["value"] == "1"
    assert configs["b"]["value"] == {"name": "b", "value": "x", "recommended_values": [],
                                     "errors": [], "visible": True}
