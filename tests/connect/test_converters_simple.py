"""StringConverter, ByteArrayConverter, SimpleHeaderConverter as Kafka's."""

from __future__ import annotations

import datetime
import decimal

import pytest

from spool.connect import api, converters, data
from spool.connect.data import DataError
from spool.connect.plugins import Plugins


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    return Plugins.discover()


def test_string_converter(plugins: Plugins) -> None:
    c = converters.make(plugins, "StringConverter", {}, True)
    assert c.from_connect_data("t", None, data.STRING, "héllo") == "héllo".encode()
    assert c.from_connect_data("t", None, None, 42) == b"42"
    assert c.from_connect_data("t", None, None, None) is None
    assert c.to_connect_data("t", None, "héllo".encode()) == (data.OPTIONAL_STRING, "héllo")
    assert c.to_connect_data("t", None, None) == (data.OPTIONAL_STRING, None)
    latin = converters.make(plugins, "StringConverter", {"converter.encoding": "ISO-8859-1"},
                            False)
    assert latin.from_connect_data("t", None, None, "é") == b"\xe9"
    with pytest.raises(api.ConfigError, match="converter.encoding"):
        converters.make(plugins, "StringConverter", {"converter.encoding": "NOPE-1"}, False)


def test_byte_array_converter(plugins: Plugins) -> None:
    c = converters.make(plugins, "org.apache.kafka.connect.converters.ByteArrayConverter", {},
                        False)
    assert c.from_connect_data("t", None, data.BYTES, b"\x00\xff") == b"\x00\xff"
    assert c.from_connect_data("t", None, None, None) is None
    assert c.to_connect_data("t", None, b"\x01") == (data.OPTIONAL_BYTES, b"\x01")
    with pytest.raises(DataError, match="Invalid schema type for ByteArrayConverter: STRING"):
        c.from_connect_data("t", None, data.STRING, "x")
    with pytest.raises(DataError, match="ByteArrayConverter is not compatible with objects"):
        c.from_connect_data("t", None, None, "x")


@pytest.mark.parametrize("schema,value,text", [
    (data.STRING, "plain text", "plain text"),
    (data.BOOLEAN, True, "true"),
    (data.INT8, 12, "12"),
    (data.INT16, 1000, "1000"),
    (data.INT32, -70000, "-70000"),
    (data.INT64, 1 << 40, str(1 << 40)),
    (data.FLOAT64, 2.5, "2.5"),
    (data.DATE_SCHEMA, datetime.date(2024, 2, 29), "2024-02-29"),
    (data.TIME_SCHEMA, datetime.time(13, 5, 7, 123000), "13:05:07.123Z"),
    (data.TIMESTAMP_SCHEMA, datetime.datetime(2024, 2, 29, 13, 5, 7, 123000,
                                              tzinfo=datetime.UTC),
     "2024-02-29T13:05:07.123Z"),
    (data.array(data.STRING), ["a", "b"], '["a","b"]'),
    (data.map_of(data.STRING, data.BOOLEAN), {"k": True}, '{"k":true}'),
])
def test_simple_header_converter(plugins: Plugins, schema: data.Schema, value: object,
                                 text: str) -> None:
    c = converters.make_header(plugins, "SimpleHeaderConverter", {})
    raw = c.from_connect_header("t", "h", schema, value)
    assert raw == text.encode()
    assert c.to_connect_header("t", "h", raw) == (schema, value)


def test_simple_header_converter_edges(plugins: Plugins) -> None:
    c = converters.make_header(plugins, "SimpleHeaderConverter", {})
    assert c.from_connect_header("t", "h", None, None) is None
    assert c.to_connect_header("t", "h", None) == (None, None)
    assert c.to_connect_header("t", "h", b"") == (data.STRING, "")
    assert c.to_connect_header("t", "h", b"[1, \"x\"]") == (None, [1, "x"])
    assert c.to_connect_header("t", "h", b"[1, 300, 70000]") == \
        (data.array(data.INT32), [1, 300, 70000])
    assert c.to_connect_header("t", "h", b'{"a": 1, "b": 2.5}') == \
        (data.map_of(data.STRING, data.FLOAT64), {"a": 1.0, "b": 2.5})
    assert c.to_connect_header("t", "h", b"99999999999999999999") == \
        (data.decimal_schema(0), decimal.Decimal("99999999999999999999"))
    assert c.from_connect_header("t", "h", data.BYTES, b"\x00") == b"AA=="
