"""spool.util.properties: what format_properties writes, parse_properties reads back."""

from __future__ import annotations

from spool.util.properties import format_properties, parse_properties


def test_values_and_keys_come_back_as_given():
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
        "log.dirs": r"C:\data\spool",
        "sasl.jaas.config": 'PlainLoginModule required username="a" password="p=\\q";',
        "ssl.keystore.key": "-----BEGIN KEY-----\nabc\n-----END KEY-----\n",
        "leading": "  two blanks, then a tab\there",
        "a key:with=odd#chars!": "#not a comment",
        "empty": "",
    }
    assert parse_properties(format_properties(props)) == props


def test_a_written_file_is_plain_key_value_lines():
    assert format_properties({"node.id": "1", "log.dirs": "/tmp/a"}) == (
        "node.id=1\nlog.dirs=/tmp/a\n")
