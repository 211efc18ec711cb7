"""Confluent's AvroConverter, JsonSchemaConverter and ProtobufConverter over a schema
registry (``spool registry``, or Confluent's).

Keys (Confluent's; others are ignored as Confluent's converters ignore them):
``schema.registry.url`` (required; the first of a comma-separated list),
``auto.register.schemas`` (true), ``use.latest.version`` (false: with it, and
auto-register off, the subject's latest id is written), ``key.subject.name.strategy`` /
``value.subject.name.strategy`` (``...TopicNameStrategy`` default: subject
``<topic>-key``/``<topic>-value``; ``...RecordNameStrategy``: the schema's name;
``...TopicRecordNameStrategy``: ``<topic>-<name>``), ``basic.auth.credentials.source=
USER_INFO`` with ``basic.auth.user.info`` (or ``schema.registry.basic.auth.user.info``).

Wire format (Confluent's): magic byte 0, the schema id as a 4-byte big-endian int, then
the payload (Avro binary; JSON text; Protobuf: the message indexes, a zig-zag varint
count and indexes, ``0`` alone for the first message, then the message). None is
written as no bytes (a tombstone) and read back as ``(None, None)``.

Writing registers (or, with ``auto.register.schemas=false``, looks up) the schema under
the subject once per schema, cached. Reading fetches the writer's schema by id once,
cached, and returns the Connect schema it maps to (``avro_data``,
``json_schema_data``, ``protobuf_data``). Errors: bad data is ``DataError`` with
Confluent's messages (``Unknown magic byte!``); a registry that cannot be reached or
answers 5xx is ``api.RetriableError``.
"""

from __future__ import annotations

import base64
import io
import json
import struct as _struct
import urllib.parse
from typing import Any

import fastavro
from google.protobuf import descriptor_pb2

from spool.connect import api
from spool.connect.converters import avro_data, json_schema_data, protobuf_data
from spool.connect.converters.json import JsonConverter, dumps, loads
from spool.connect.data import DataError, Schema
from spool.registry.client import (
    RegistryClient,
    RegistryClientError,
    RegistryHTTPError,
    RegistryUnreachable,
)

MAGIC = 0


def config_def() -> api.ConfigDef:
    return (api.ConfigDef()
            .define("schema.registry.url", api.LIST, api.REQUIRED, api.HIGH,
                    "Comma-separated list of URLs for Schema Registry instances.")
            .define("auto.register.schemas", api.BOOLEAN, True, api.MEDIUM,
                    "Specify if the Serializer should attempt to register the Schema.")
            .define("use.latest.version", api.BOOLEAN, False, api.LOW,
                    "Use the latest version of the subject's schema for serialization.")
            .define("key.subject.name.strategy", api.STRING, "TopicNameStrategy", api.MEDIUM,
                    "Subject name strategy for keys.")
            .define("value.subject.name.strategy", api.STRING, "TopicNameStrategy",
                    api.MEDIUM, "Subject name strategy for values."))


class RegistryConverter(api.Converter):
    FORMAT = ""
    NAME = ""

    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self.is_key = False
        self._ids: dict[tuple[str, str], int] = {}
        self._by_id: dict[int, Any] = {}
        self._writers: dict[Any, Any] = {}
        # schema object -> (schema, registry text, record name): schemas are immutable
        self._texts: dict[int, tuple[Schema, str, str | None]] = {}

    def config_def(self) -> api.ConfigDef:
        return config_def()

    def configure(self, props: dict[str, Any], is_key: bool = False) -> None:
        cfg = config_def().parse(props)
        self.is_key = is_key
        self.auto_register = cfg["auto.register.schemas"]
        self.use_latest = cfg["use.latest.version"]
        strategy = cfg["key.subject.name.strategy" if is_key else "value.subject.name.strategy"]
        self.strategy = strategy.rsplit(".", 1)[-1]
        if self.strategy not in ("TopicNameStrategy", "RecordNameStrategy",
                                 "TopicRecordNameStrategy"):
            key = "key.subject.name.strategy" if is_key else "value.subject.name.strategy"
            raise api.ConfigError({key: [f"Invalid value {strategy} for configuration {key}: "
                                         "unknown subject name strategy"]})
        url = cfg["schema.registry.url"][0] if cfg["schema.registry.url"] else ""
        user_info = props.get("basic.auth.user.info") \
            or props.get("schema.registry.basic.auth.user.info")
        if user_info and str(props.get("basic.auth.credentials.source", "USER_INFO")).upper() \
                in ("USER_INFO", "URL"):
            parts = urllib.parse.urlsplit(url)
            user, _, password = str(user_info).partition(":")
            netloc = f"{urllib.parse.quote(user, safe='')}:" \
                     f"{urllib.parse.quote(password, safe='')}@{parts.netloc}"
            url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
        try:
            self.client = RegistryClient(url, timeout=float(props.get("request.timeout.s", 30)))
        except RegistryClientError as e:
            raise api.ConfigError({"schema.registry.url": [
                f"Invalid value {url} for configuration schema.registry.url: {e}"]}) from None

    # ---- subclasses

    def schema_text(self, schema: Schema) -> tuple[str, str | None]:
        """The registry text of ``schema`` and the record name the strategies use."""
        raise NotImplementedError

    def encode(self, schema: Schema, value: Any, writer: Any) -> bytes:
        raise NotImplementedError

    def parse_writer(self, text: str) -> Any:
        """A registry text parsed, as ``decode`` needs it."""
        raise NotImplementedError

    def decode(self, writer: Any, payload: memoryview) -> tuple[Schema, Any]:
        """The Connect schema and value of a payload written with ``writer``."""
        raise NotImplementedError

    def prepare(self, schema: Schema, text: str) -> Any:
        """What ``encode`` needs for ``schema`` (the parsed schema), cached by text."""
        return None

    # ---- Converter

    def subject(self, topic: str, record_name: str | None) -> str:
        if self.strategy == "TopicNameStrategy":
            return f"{topic}-{'key' if self.is_key else 'value'}"
        if not record_name:
            raise DataError(f"{self.strategy} needs a named schema")
        if self.strategy == "RecordNameStrategy":
            return record_name
        return f"{topic}-{record_name}"

    def from_connect_data(self, topic: str, headers: Any, schema: Schema | None,
                          value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise DataError(f"Failed to serialize {self.NAME} data from topic {topic} : "
                            "a schema is required")
        hit = self._texts.get(id(schema))
        if hit is None or hit[0] is not schema:
            if len(self._texts) >= 1000:
                self._texts.clear()
            hit = self._texts[id(schema)] = (schema, *self.schema_text(schema))
        _, text, record_name = hit
        subject = self.subject(topic, record_name)
        try:
            schema_id = self._schema_id(subject, text)
        except RegistryUnreachable as e:
            raise api.RetriableError(f"Failed to access {self.NAME} data from topic {topic} : "
                                     f"{e}") from e
        except RegistryHTTPError as e:
            if e.status >= 500:
                raise api.RetriableError(str(e)) from e
            raise DataError(f"Failed to serialize {self.NAME} data from topic {topic} : "
                            f"{e}") from e
        writer = self._writers.get(text)
        if writer is None:
            writer = self._writers[text] = self.prepare(schema, text)
        try:
            payload = self.encode(schema, value, writer)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise DataError(f"Failed to serialize {self.NAME} data from topic {topic} : "
                            f"{e}") from e
        return bytes([MAGIC]) + _struct.pack(">i", schema_id) + payload

    def _schema_id(self, subject: str, text: str) -> int:
        key = (subject, text)
        hit = self._ids.get(key)
        if hit is not None:
            return hit
        assert self.client is not None
        if self.auto_register:
            schema_id = self.client.register(subject, text, self.FORMAT)
        elif self.use_latest:
            schema_id = int(self.client.version(subject, "latest")["id"])
        else:
            body: dict[str, Any] = {"schema": text}
            if self.FORMAT != "AVRO":
                body["schemaType"] = self.FORMAT
            schema_id = int(self.client.call(
                "POST", f"/subjects/{urllib.parse.quote(subject, safe='')}", body)["id"])
        self._ids[key] = schema_id
        return schema_id

    def to_connect_data(self, topic: str, headers: Any,
                        raw: bytes | None) -> tuple[Schema | None, Any]:
        if raw is None:
            return None, None
        view = memoryview(raw)
        if len(view) < 5 or view[0] != MAGIC:
            raise DataError(f"Failed to deserialize data for topic {topic} to {self.NAME}: "
                            "Unknown magic byte!")
        schema_id = _struct.unpack(">i", view[1:5])[0]
        try:
            writer = self._writer(schema_id)
        except RegistryUnreachable as e:
            raise api.RetriableError(f"Failed to deserialize data for topic {topic} to "
                                     f"{self.NAME}: {e}") from e
        except RegistryHTTPError as e:
            if e.status >= 500:
                raise api.RetriableError(str(e)) from e
            raise DataError(f"Failed to deserialize data for topic {topic} to {self.NAME}: "
                            f"Error retrieving {self.NAME} schema for id {schema_id}: "
                            f"{e}") from e
        try:
            return self.decode(writer, view[5:])
        except DataError as e:
            raise DataError(f"Failed to deserialize data for topic {topic} to {self.NAME}: "
                            f"{e}") from e
        except Exception as e:  # noqa: BLE001 - a decoder's failure on bad bytes is bad data
            raise DataError(f"Failed to deserialize data for topic {topic} to {self.NAME}: "
                            f"{type(e).__name__}: {e}") from e

    def _writer(self, schema_id: int) -> Any:
        hit = self._by_id.get(schema_id)
        if hit is None:
            hit = self._by_id[schema_id] = self.fetch_writer(schema_id)
        return hit

    def fetch_writer(self, schema_id: int) -> Any:
        """The writer's schema ``schema_id`` names, parsed (``parse_writer``)."""
        assert self.client is not None
        return self.parse_writer(self.client.by_id(schema_id)["schema"])


class AvroConverter(RegistryConverter):
    FORMAT, NAME = "AVRO", "Avro"

    def schema_text(self, schema: Schema) -> tuple[str, str | None]:
        avro = avro_data.to_avro(schema)
        name = avro.get("name") if isinstance(avro, dict) and avro.get("type") == "record" \
            else None
        return json.dumps(avro, separators=(",", ":")), name

    def prepare(self, schema: Schema, text: str) -> Any:
        return fastavro.parse_schema(json.loads(text))

    def encode(self, schema: Schema, value: Any, writer: Any) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, writer, avro_data.to_avro_value(schema, value))
        return out.getvalue()

    def parse_writer(self, text: str) -> Any:
        doc = json.loads(text)
        return avro_data.to_connect(doc), fastavro.parse_schema(doc)

    def decode(self, writer: Any, payload: memoryview) -> tuple[Schema, Any]:
        schema, parsed = writer
        datum = fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)
        return schema, avro_data.to_connect_value(schema, datum)


class JsonSchemaConverter(RegistryConverter):
    FORMAT, NAME = "JSON", "JSON"

    def __init__(self) -> None:
        super().__init__()
        self.json = JsonConverter()
        self.json.configure({"schemas.enable": "false", "decimal.format": "NUMERIC"})

    def schema_text(self, schema: Schema) -> tuple[str, str | None]:
        doc = {"$schema": "http://json-schema.org/draft-07/schema#",
               **json_schema_data.to_json_schema(schema)}
        return json.dumps(doc, separators=(",", ":")), schema.name

    def encode(self, schema: Schema, value: Any, writer: Any) -> bytes:
        return dumps(self.json.to_json(schema, value))

    def parse_writer(self, text: str) -> Any:
        return json_schema_data.to_connect(json.loads(text))

    def decode(self, writer: Any, payload: memoryview) -> tuple[Schema, Any]:
        return writer, self.json.to_connect(writer, loads(payload))


class ProtobufConverter(RegistryConverter):
    FORMAT, NAME = "PROTOBUF", "Protobuf"

    def schema_text(self, schema: Schema) -> tuple[str, str | None]:
        fdp = protobuf_data.file_descriptor(schema)
        return protobuf_data.registered_text(fdp), schema.name

    def prepare(self, schema: Schema, text: str) -> Any:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
        return protobuf_data.message_class([fdp], protobuf_data.message_by_indexes(fdp, [0]))

    def encode(self, schema: Schema, value: Any, writer: Any) -> bytes:
        return protobuf_data.write_indexes([0]) + protobuf_data.encode(schema, writer, value)

    def fetch_writer(self, schema_id: int) -> Any:
        assert self.client is not None
        doc = self.client.call("GET", f"/schemas/ids/{int(schema_id)}",
                               params={"format": "serialized"})
        files = [self._file(doc["schema"])]
        for ref in doc.get("references") or []:
            sub = self.client.call(
                "GET", f"/subjects/{urllib.parse.quote(ref['subject'], safe='')}/versions/"
                       f"{ref['version']}", params={"format": "serialized"})
            dep = self._file(sub["schema"])
            dep.name = ref["name"]
            files.insert(0, dep)
        return files, {}

    @staticmethod
    def _file(text: str) -> descriptor_pb2.FileDescriptorProto:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))

    def decode(self, writer: Any, payload: memoryview) -> tuple[Schema, Any]:
        files, by_indexes = writer
        indexes, pos = protobuf_data.read_indexes(payload)
        key = tuple(indexes)
        hit = by_indexes.get(key)
        if hit is None:
            name = protobuf_data.message_by_indexes(files[-1], indexes)
            cls = protobuf_data.message_class(files, name)
            hit = by_indexes[key] = (protobuf_data.message_schema(cls.DESCRIPTOR), cls)
        schema, cls = hit
        return schema, protobuf_data.decode(schema, cls, bytes(payload[pos:]))
