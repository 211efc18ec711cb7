"""What a schema type is to the registry: ``Format``.

``parse(schema, references)`` turns the text a client registered into the format's
parsed form, or raises ``model.InvalidSchema`` (42201) saying what is wrong;
``references`` maps each reference's ``name`` to the referenced schema's text, already
resolved by the caller (transitively: a referenced schema's own references are in the
map too). ``canonical(parsed)`` is the text two registrations of the same schema agree
on (the registry deduplicates on it: registering it again returns the existing id, and
lookup by schema matches on it). ``incompatibilities(reader, writer)`` lists why data
written with ``writer`` cannot be read with ``reader`` (empty: it can); BACKWARD asks it
with the new schema as reader, FORWARD with the new one as writer (``compatibility``).

``formats()`` maps the API's ``schemaType`` (AVRO, JSON, PROTOBUF) to its module's ``FORMAT``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Format(Protocol):
    name: str  # the API's schemaType

    def parse(self, schema: str, references: Mapping[str, str]) -> Any: ...

    def canonical(self, parsed: Any) -> str: ...

    def incompatibilities(self, reader: Any, writer: Any) -> list[str]: ...


def formats() -> dict[str, Format]:
    """AVRO, JSON and PROTOBUF, each imported on first use."""
    from spool.registry.formats import avro, json_schema, protobuf

    return {f.name: f for f in (avro.FORMAT, json_schema.FORMAT, protobuf.FORMAT)}
