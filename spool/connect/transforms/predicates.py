"""Kafka's predicates: TopicNameMatches (``pattern``: the whole topic matches),
HasHeaderKey (``name``: the record has at least one header with that key),
RecordIsTombstone (the value is None)."""

from __future__ import annotations

import re
from typing import Any

from spool.connect import api
from spool.connect.transforms.routing import java_regex


class TopicNameMatches(api.Predicate):
    def config_def(self) -> api.ConfigDef:
        return api.ConfigDef().define(
            "pattern", api.STRING, api.REQUIRED, api.MEDIUM,
            "A Java regular expression for matching against the name of a record's topic.",
            validator=_pattern)

    def configure(self, props: dict[str, Any]) -> None:
        self.pattern = re.compile(java_regex(self.config_def().parse(props)["pattern"]))

    def test(self, record: api.ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


def _pattern(name: str, value: Any) -> None:
    if not value:
        raise api.ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      "String must be non-empty"]})
    try:
        re.compile(java_regex(value))
    except re.error as e:
        raise api.ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      f"entry must be a Java-compatible regular expression: "
                                      f"{e}"]}) from None


class HasHeaderKey(api.Predicate):
    def config_def(self) -> api.ConfigDef:
        return api.ConfigDef().define("name", api.STRING, api.REQUIRED, api.MEDIUM,
                                      "The header name.")

    def configure(self, props: dict[str, Any]) -> None:
        self.name = self.config_def().parse(props)["name"]
        if not self.name:
            raise api.ConfigError({"name": ["Invalid value  for configuration name: "
                                            "String must be non-empty"]})

    def test(self, record: api.ConnectRecord) -> bool:
        return any(h.key == self.name for h in record.headers)


class RecordIsTombstone(api.Predicate):
    def test(self, record: api.ConnectRecord) -> bool:
        return record.value is None
