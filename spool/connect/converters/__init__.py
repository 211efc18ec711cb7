"""Converters: Connect data <-> bytes (``api.Converter``), built from configuration.

``make(plugins, class_name, props, is_key)`` loads ``class_name`` as a converter
(``plugins.load``), configures it with ``props`` (the converter's own keys, the
``key.converter.``/``value.converter.`` prefix stripped: ``schemas.enable``) and returns
it. ``make_header(plugins, class_name, props)`` does the same for a header converter.
Both raise ``api.ConfigError`` for an unknown class or a bad key.

Modules: ``json`` (Kafka's JsonConverter), ``simple`` (StringConverter,
ByteArrayConverter, SimpleHeaderConverter), ``registry`` (Avro, JSON Schema and
Protobuf through the schema registry, Confluent's wire format).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spool.connect import api

if TYPE_CHECKING:
    from spool.connect.plugins import Plugins

__all__ = ["make", "make_header"]


def make(plugins: Plugins, class_name: str, props: dict[str, Any],
         is_key: bool) -> api.Converter:
    klass = plugins.load(class_name, "converter")
    conv = klass()
    _configure(lambda: conv.configure(dict(props), is_key))
    return conv


def make_header(plugins: Plugins, class_name: str,
                props: dict[str, Any]) -> api.HeaderConverter:
    klass = plugins.load(class_name, "header_converter")
    conv = klass()
    _configure(lambda: conv.configure(dict(props)))
    return conv


def _configure(fn: Any) -> None:
    try:
        fn()
    except api.ConfigError:
        raise
    except (ValueError, TypeError, KeyError) as e:
        raise api.ConfigError(str(e)) from e
