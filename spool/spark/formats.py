"""Schema-aware ``key``/``value`` columns: ``valueFormat=json|avro`` (and ``keyFormat``).

Options (all optional; without them ``key`` and ``value`` stay binary):

* ``valueFormat``: ``json`` or ``avro``; ``valueSchema``: for ``json`` a Spark
  DDL string (``"id string, amount double"``), for ``avro`` an Avro schema
  (JSON text, its top level a record). ``keyFormat``/``keySchema`` do the
  same for ``key``.
* ``valueSchemaId`` / ``keySchemaId`` (avro, writing): frame each record the
  Confluent way (magic byte 0, the id as 4 big-endian bytes, then the Avro
  binary), the schema being the one given in the options, the id as given.
* ``schema.registry.url`` (avro): a schema registry (``spool registry``, or any
  Confluent-compatible one) names the schemas instead, by subject
  (``valueSubject``/``keySubject``, default ``<topic>-value``/``<topic>-key``
  of the one ``subscribe``d topic when reading, of the ``topic`` option when
  writing): reads decode each value with the writer schema its framing's id
  names into ``valueSchema`` or else the subject's latest schema, whose fields
  are the columns; writes register the schema under the subject and frame
  each value with its id. Not with ``valueSchemaId``. ``avro_registry.py``.

Reading (batch and streaming): the source's readers decode the ``key``/``value``
column of each Arrow batch the fetch yields, on the executors; the other Kafka
columns are untouched. json as Spark's ``from_json`` (PERMISSIVE), vectorized:
``json_format.py``; avro with fastavro, Confluent framing recognised and
stripped, plain Avro binary otherwise, spark-avro's type mapping:
``avro_format.py``.

Writing: a struct ``key``/``value`` column is encoded before the sink sends it
(json as ``to_json``, using the column's own type; avro with ``valueSchema``
if given, else a schema derived from the column's type as ``to_avro`` does).
A null struct is written as a null value (a tombstone). A format option for a
column the DataFrame does not have is ignored.

Invalid options raise ``ValueError`` naming the option.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.types import DataType, StructField, StructType

from spool.spark import avro_registry
from spool.spark.avro_format import avro_to_spark, decode_avro, encode_avro, parsed, spark_to_avro
from spool.spark.ddl import parse_ddl
from spool.spark.json_format import decode_json, encode_json

FORMATS = ("json", "avro")


@dataclass(frozen=True)
class ColumnFormat:
    """How one column (``key`` or ``value``) is encoded: everything here pickles."""

    column: str  # "key" | "value"
    kind: str  # "json" | "avro"
    spark_type: StructType
    avro_writer: str | None = None  # the Avro schema given or derived, JSON text
    avro_reader: str | None = None  # the same without the logical types Spark does not map
    schema_id: int | None = None
    registry_url: str | None = None  # reads: writer schemas by the framing's id

    def decode(self, values: pa.Array) -> pa.Array:
        """Binary values -> the struct column (same length, same order)."""
        if self.kind == "json":
            return decode_json(values, self.spark_type)
        if self.registry_url is not None:
            return avro_registry.decode_registry(values, self.avro_reader, self.spark_type,
                                                 self.registry_url)
        return decode_avro(values, self.avro_reader, self.spark_type)

    def encode(self, column: pa.Array) -> pa.Array:
        """The struct column -> binary values (null struct -> null value)."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if not pa.types.is_struct(column.type):
            raise ValueError(
                f"{self.column}Format={self.kind} writes a struct {self.column} column, "
                f"not {column.type}"
            )
        if self.kind == "json":
            return encode_json(column)
        return encode_avro(column, self.avro_writer, self.schema_id)


def _opt(opts: Mapping[str, str], name: str) -> str | None:
    lowered = {k.lower(): v for k, v in opts.items()}
    value = lowered.get(name.lower())
    return None if value is None else str(value)


def parse_column_format(
    opts: Mapping[str, str], column: str, *, for_read: bool, column_type: DataType | None = None
) -> ColumnFormat | None:
    """``<column>Format``/``<column>Schema``/``<column>SchemaId`` -> a ColumnFormat, or None.

    ``column_type`` (writing) is the DataFrame's column type: json writes need no schema
    option, avro writes derive one from it when ``<column>Schema`` is absent."""
    kind = _opt(opts, f"{column}Format")
    schema_text = _opt(opts, f"{column}Schema")
    id_text = _opt(opts, f"{column}SchemaId")
    url = _opt(opts, "schema.registry.url")
    if kind is not None and kind.strip().lower() == "avro" and url:
        return _registry_format(opts, column, url, schema_text, id_text, for_read=for_read,
                                column_type=column_type)
    if kind is None:
        for name, given in ((f"{column}Schema", schema_text), (f"{column}SchemaId", id_text)):
            if given is not None:
                raise ValueError(f"option {name} needs the option {column}Format")
        return None
    kind = kind.strip().lower()
    if kind not in FORMATS:
        raise ValueError(f"option {column}Format must be json or avro, got {kind!r}")
    schema_id = None
    if id_text is not None:
        if kind != "avro":
            raise ValueError(f"option {column}SchemaId is only for {column}Format=avro")
        try:
            schema_id = int(id_text)
        except ValueError:
            schema_id = -1
        if not 0 <= schema_id < 2**31:
            raise ValueError(f"option {column}SchemaId must be a schema id (0..2^31-1), got {id_text!r}")
    if column_type is not None and not isinstance(column_type, StructType):
        raise ValueError(
            f"option {column}Format={kind} writes a struct {column} column, "
            f"not {column_type.simpleString()}"
        )
    if schema_text is None:
        if for_read or column_type is None:
            raise ValueError(f"option {column}Schema is required with {column}Format={kind}")
        if kind == "json":
            return ColumnFormat(column, kind, column_type)
        writer = json.dumps(spark_to_avro(column_type, "topLevelRecord", ""))
        spark_type, reader = column_type, writer
        _check_avro(writer, column)
        return ColumnFormat(column, kind, spark_type, writer, reader, schema_id)
    if kind == "json":
        try:
            return ColumnFormat(column, kind, parse_ddl(schema_text))
        except ValueError as exc:
            raise ValueError(f"option {column}Schema is not a Spark DDL schema: {exc}") from None
    try:
        avro = json.loads(schema_text)
    except ValueError:
        raise ValueError(f"option {column}Schema is not Avro schema JSON: {schema_text[:80]!r}") from None
    try:
        spark_type, reader = avro_to_spark(avro, {}, None, ())
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"option {column}Schema: {exc}") from None
    if not isinstance(spark_type, StructType):
        raise ValueError(f"option {column}Schema must be an Avro record, got {avro!r}")
    writer, reader_text = json.dumps(avro), json.dumps(reader)
    _check_avro(writer, column)
    _check_avro(reader_text, column)
    if column_type is not None:  # writing: the record's fields without a default must be there
        have = {f.name for f in column_type.fields} if isinstance(column_type, StructType) else set()
        for f in avro["fields"]:
            if f["name"] not in have and "default" not in f:
                raise ValueError(
                    f"option {column}Schema: field {f['name']!r} has no default and the "
                    f"{column} column has no such field"
                )
    return ColumnFormat(column, kind, spark_type, writer, reader_text, schema_id)


def _subject(opts: Mapping[str, str], column: str, *, for_read: bool) -> str:
    """``<column>Subject``, else ``<topic>-<column>`` (TopicNameStrategy)."""
    given = _opt(opts, f"{column}Subject")
    if given:
        return given
    if for_read:
        topics = [t.strip() for t in (_opt(opts, "subscribe") or "").split(",") if t.strip()]
        if len(topics) == 1:
            return f"{topics[0]}-{column}"
        raise ValueError(f"option schema.registry.url reads subject <topic>-{column} of one "
                         f"subscribed topic; with several, or subscribePattern or assign, "
                         f"give the option {column}Subject")
    topic = _opt(opts, "topic")
    if topic:
        return f"{topic}-{column}"
    raise ValueError(f"option schema.registry.url writes under subject <topic>-{column}: give "
                     f"the option topic (or {column}Subject)")


def _registry_format(opts: Mapping[str, str], column: str, url: str, schema_text: str | None,
                     id_text: str | None, *, for_read: bool,
                     column_type: DataType | None) -> ColumnFormat:
    """``<column>Format=avro`` with ``schema.registry.url``: the subject's schema and ids."""
    if id_text is not None:
        raise ValueError(f"option {column}SchemaId and schema.registry.url exclude each "
                         f"other: the registry gives the id")
    subject = _subject(opts, column, for_read=for_read)
    if for_read:
        if schema_text is None:
            schema_text = avro_registry.latest_schema(url, subject)
        fmt = parse_column_format({f"{column}Format": "avro", f"{column}Schema": schema_text},
                                  column, for_read=True)
        return dataclasses.replace(fmt, registry_url=url)  # type: ignore[arg-type]
    if schema_text is None and isinstance(column_type, StructType):
        name, namespace = avro_registry.latest_name(url, subject)
        schema_text = json.dumps(spark_to_avro(column_type, name, namespace))
    given = {f"{column}Format": "avro"}
    if schema_text is not None:
        given[f"{column}Schema"] = schema_text
    fmt = parse_column_format(given, column, for_read=False, column_type=column_type)
    schema_id = avro_registry.register(url, subject, fmt.avro_writer)  # type: ignore[union-attr, arg-type]
    return dataclasses.replace(fmt, schema_id=schema_id)  # type: ignore[arg-type]


def _check_avro(schema_json: str, column: str) -> None:
    try:
        parsed(schema_json)
    except Exception as exc:  # noqa: BLE001 - fastavro's SchemaParseException and friends
        raise ValueError(f"option {column}Schema is not a valid Avro schema: {exc}") from None


def read_schema(base: StructType, formats: list[ColumnFormat]) -> StructType:
    """Spark's Kafka schema with the formatted columns' types put in."""
    by_column = {f.column: f.spark_type for f in formats}
    return StructType(
        [StructField(f.name, by_column.get(f.name, f.dataType), True) for f in base.fields]
    )


def decode_batch(batch: pa.RecordBatch, formats: list[ColumnFormat]) -> pa.RecordBatch:
    """Replace each formatted binary column of a fetched batch by its decoded struct."""
    columns, fields = list(batch.columns), list(batch.schema)
    for fmt in formats:
        i = batch.schema.get_field_index(fmt.column)
        columns[i] = fmt.decode(columns[i])
        fields[i] = pa.field(fmt.column, columns[i].type)
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def decode_batches(batches: Iterator[pa.RecordBatch], formats: list[ColumnFormat]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield decode_batch(batch, formats)


def encode_batches(batches: Iterator[pa.RecordBatch], formats: list[ColumnFormat]) -> Iterator[pa.RecordBatch]:
    """Replace each formatted struct column of the rows to write by its encoded bytes."""
    for batch in batches:
        names = [n.lower() for n in batch.schema.names]
        columns = list(batch.columns)
        for fmt in formats:
            if fmt.column in names:
                i = names.index(fmt.column)
                columns[i] = fmt.encode(columns[i])
        yield pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
