"""The row schema of Spark's Kafka source, as a Spark DDL string and as an Arrow schema.

The Arrow schema must match Spark's types exactly for the Arrow fast path:
binary key/value, string topic, int32 partition, int64 offset, UTC
microsecond timestamp, int32 timestampType and (with ``includeHeaders``)
``array<struct<key: string, value: binary>>`` headers.
"""

from __future__ import annotations

import pyarrow as pa

BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_BASE_FIELDS = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
]
ARROW_SCHEMA = pa.schema(_BASE_FIELDS)
ARROW_SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, ("headers", HEADER_TYPE)])


def ddl(include_headers: bool) -> str:
    return f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    return ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA
