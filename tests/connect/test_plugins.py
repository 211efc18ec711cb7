"""plugins.Plugins: discovery through the entry points, the names a plugin answers to,
Kafka's error for an unknown class, and the /connector-plugins listings."""

from __future__ import annotations

import pytest

from spool.connect import api
from spool.connect.converters.json import JsonConverter
from spool.connect.converters.simple import SimpleHeaderConverter, StringConverter
from spool.connect.plugins import Plugins


class EchoSource(api.SourceConnector):
    def version(self) -> str:
        return "9.9"


class EchoSink(api.SinkConnector):
    pass


@pytest.fixture
def plugins() -> Plugins:
    return Plugins.discover()


@pytest.mark.parametrize("name", [
    "org.apache.kafka.connect.json.JsonConverter", "JsonConverter", "Json",
    "spool.connect.converters.json:JsonConverter", "spool.connect.converters.json.JsonConverter",
    " JsonConverter ",
])
def test_a_converter_answers_to_kafkas_names(plugins: Plugins, name: str) -> None:
    assert plugins.load(name, "converter") is JsonConverter


def test_kinds_are_checked(plugins: Plugins) -> None:
    assert plugins.load("StringConverter", "header_converter") is StringConverter
    assert plugins.load("SimpleHeaderConverter", "header_converter") is SimpleHeaderConverter
    with pytest.raises(api.ConfigError) as e:
        plugins.load("SimpleHeaderConverter", "converter")
    assert str(e.value) == "Class SimpleHeaderConverter could not be found."


def test_unknown_connector_is_kafkas_error(plugins: Plugins) -> None:
    with pytest.raises(api.ConfigError) as e:
        plugins.load("com.example.NoSuchConnector", "connector")
    assert str(e.value).startswith("Failed to find any class that implements Connector and "
                                   "which name matches com.example.NoSuchConnector, available "
                                   "connectors are:")


def test_python_path_and_registered_connectors(plugins: Plugins) -> None:
    assert plugins.load(f"{__name__}:EchoSource", "connector") is EchoSource
    assert plugins.load(f"{__name__}.EchoSink", "connector") is EchoSink
    with pytest.raises(api.ConfigError):
        plugins.load(f"{__name__}:EchoSource", "converter")
    plugins.register("com.example.EchoSourceConnector", EchoSource)
    for name in ("com.example.EchoSourceConnector", "EchoSourceConnector", "EchoSource"):
        assert plugins.load(name, "connector") is EchoSource
    listed = [p for p in plugins.connectors() if p["class"].startswith("com.example")]
    assert listed == [{"class": "com.example.EchoSourceConnector", "type": "source",
                       "version": "9.9"}]


def test_listings(plugins: Plugins) -> None:
    plugins.register("com.example.EchoSink", EchoSink)
    conns = plugins.connectors()
    assert [p["class"] for p in conns] == sorted(p["class"] for p in conns)
    assert {"class": "com.example.EchoSink", "type": "sink",
            "version": plugins.all()[0]["version"]} in conns
    assert all(p["type"] in ("source", "sink") for p in conns)
    everything = plugins.all()
    types = {(p["class"], p["type"]) for p in everything}
    assert ("org.apache.kafka.connect.json.JsonConverter", "converter") in types
    assert ("org.apache.kafka.connect.storage.StringConverter", "header_converter") in types
    assert ("org.apache.kafka.connect.storage.SimpleHeaderConverter", "converter") not in types
    assert all(p["version"] for p in everything)


def test_a_plugin_that_fails_to_import_is_reported_when_loaded() -> None:
    plugins = Plugins({"com.example.Broken": "no_such_module_xyz:Broken",
                       "org.apache.kafka.connect.json.JsonConverter":
                       "spool.connect.converters.json:JsonConverter"})
    assert [p["class"] for p in plugins.all()] == [
        "org.apache.kafka.connect.json.JsonConverter"] * 2
    with pytest.raises(api.ConfigError, match="Failed to load class com.example.Broken: "
                                              "ModuleNotFoundError"):
        plugins.load("com.example.Broken", "connector")


def test_connector_version_defaults_to_spools() -> None:
    from importlib.metadata import version
    assert EchoSink().version() == version("spool")


def test_every_registered_plugin_loads() -> None:
    """Each ``spool.connect.plugins`` entry point imports and implements some kind: a
    broken registration fails here rather than in a user's connector."""
    from importlib.metadata import entry_points

    plugins = Plugins.discover()
    names = {ep.name for ep in entry_points(group="spool.connect.plugins")}
    listed = {p["class"] for p in plugins.all()}
    assert names <= listed, sorted(names - listed)
    shipped = {p["class"]: p["type"] for p in plugins.connectors()}
    assert shipped == {
        "io.debezium.connector.jdbc.JdbcSinkConnector": "sink",
        "io.debezium.connector.postgresql.PostgresConnector": "source",
        "org.apache.kafka.connect.file.FileStreamSinkConnector": "sink",
        "org.apache.kafka.connect.file.FileStreamSourceConnector": "source"}
    for alias, kind in (("FileStreamSource", "connector"), ("PostgresConnector", "connector"),
                        ("JdbcSink", "connector"), ("AvroConverter", "converter"),
                        ("RegexRouter", "transformation"), ("InsertField$Value",
                                                             "transformation"),
                        ("TopicNameMatches", "predicate")):
        assert plugins.load(alias, kind) is not None
