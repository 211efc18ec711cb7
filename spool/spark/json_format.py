"""JSON values <-> Arrow struct columns, as Spark's ``from_json`` / ``to_json`` do.

Reading (``decode_json``) follows ``from_json`` in its default PERMISSIVE mode,
checked against Spark 4.3: a null or empty value -> null; a value that is not
JSON, or not a JSON object -> a struct whose fields are all null; a field
whose JSON does not fit its type -> that field null, the others kept (an
array or map with one such element -> null); a string field given other
JSON -> that JSON's text; binary fields are base64; field names match
case-sensitively, unknown fields are ignored; the first JSON value of a text
is read; single-quoted strings are accepted (Spark's allowSingleQuotes);
integer timestamps are seconds; zone-less timestamps are UTC; a
timestamp_ntz with a zone offset is null. Timestamps and dates are ISO 8601
as pyarrow and Python's ``fromisoformat`` read them: Spark's own parser differs
in corners (it refuses minutes without seconds, accepts ``2024-2-3`` dates and
more than 6 fractional digits).

Vectorized: the values are joined with newlines and parsed by
``pyarrow.json`` with the schema (dates read as strings, then cast); a block
it rejects (or that yields another number of rows) is split in halves until
the rejected values are found, and those, values holding line breaks, and
every value of a schema with maps or binary fields, go through ``json_value``,
a per-value parser with the rules above.

Writing (``encode_json``) gives ``to_json``'s text: null fields left out,
timestamps ``yyyy-MM-dd'T'HH:mm:ss.SSS`` + ``Z`` (UTC), dates ``yyyy-MM-dd``,
binary base64, doubles as Java prints them (``1.0``, ``1.0E20``), NaN and
infinities as strings, decimals with their scale, strings in UTF-8. Column-wise
with pyarrow compute; only strings needing escapes, binary, arrays, maps and
rare floats go value by value.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spool.spark.ddl import arrow_type

_SMALL = 16  # below this many values a rejected block is parsed value by value
_BLOCK = 1 << 20  # pyarrow.json's block: faster than one block for all (measured); a longer
# value fails its block and goes through the per-value parser


def _json_wire_type(t: DataType) -> pa.DataType | None:
    """The type pyarrow.json reads ``t`` as (cast to ``arrow_type`` after), None if it cannot."""
    if isinstance(t, BinaryType | MapType):
        return None
    if isinstance(t, DateType | TimestampNTZType):  # read as text, then cast: the cast to
        return pa.string()  # timestamp_ntz refuses a zone offset, as Spark does
    if isinstance(t, ArrayType):
        inner = _json_wire_type(t.elementType)
        return None if inner is None else pa.list_(inner)
    if isinstance(t, StructType):
        fields = []
        for f in t.fields:
            inner = _json_wire_type(f.dataType)
            if inner is None:
                return None
            fields.append(pa.field(f.name, inner))
        return pa.struct(fields)
    return arrow_type(t)


class _Bad(Exception):
    """A JSON value that does not fit its Spark type: the field becomes null."""


_INT_RANGE = {
    ByteType: (-(2**7), 2**7 - 1),
    ShortType: (-(2**15), 2**15 - 1),
    IntegerType: (-(2**31), 2**31 - 1),
    LongType: (-(2**63), 2**63 - 1),
}
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "-Infinity": -math.inf}


def _parse_timestamp(text: str, aware: bool) -> dt.datetime:
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    value = dt.datetime.fromisoformat(text)
    if not aware:
        if value.tzinfo is not None:
            raise ValueError("timestamp_ntz with a zone offset")  # null, as in Spark
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _from_json(value: Any, t: DataType) -> Any:
    """One parsed JSON value as Spark's JSON reader converts it to ``t`` (raises _Bad)."""
    if value is None:
        return None
    if isinstance(t, StringType):
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"))
    if isinstance(t, BooleanType):
        if isinstance(value, bool):
            return value
        raise _Bad
    if type(t) in _INT_RANGE:
        low, high = _INT_RANGE[type(t)]
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
            return value
        raise _Bad
    if isinstance(t, FloatType | DoubleType):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and value in _NON_FINITE:
            return _NON_FINITE[value]
        raise _Bad
    if isinstance(t, DecimalType):
        if isinstance(value, bool) or not isinstance(value, int | float | str | decimal.Decimal):
            raise _Bad
        try:
            d = decimal.Decimal(str(value)).quantize(
                decimal.Decimal(1).scaleb(-t.scale), rounding=decimal.ROUND_HALF_UP
            )
        except (decimal.InvalidOperation, ValueError):
            raise _Bad from None
        if not d.is_finite() or len(d.as_tuple().digits) > t.precision:
            raise _Bad
        return d
    if isinstance(t, TimestampType | TimestampNTZType):
        aware = isinstance(t, TimestampType)
        if isinstance(value, int) and not isinstance(value, bool):  # seconds since the epoch
            stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=value)
            return stamp if aware else stamp.replace(tzinfo=None)
        if isinstance(value, str):
            try:
                return _parse_timestamp(value, aware)
            except ValueError:
                raise _Bad from None
        raise _Bad
    if isinstance(t, DateType):
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value.strip()[:10])
            except ValueError:
                raise _Bad from None
        raise _Bad
    if isinstance(t, BinaryType):
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                raise _Bad from None
        raise _Bad
    if isinstance(t, ArrayType):
        if not isinstance(value, list):
            raise _Bad
        return [_from_json(v, t.elementType) for v in value]  # one bad element: all bad
    if isinstance(t, MapType):
        if not isinstance(value, dict):
            raise _Bad
        return [(k, _from_json(v, t.valueType)) for k, v in value.items()]
    if isinstance(t, StructType):
        if not isinstance(value, dict):
            raise _Bad
        return {f.name: _field(value.get(f.name), f.dataType) for f in t.fields}
    raise _Bad


def _field(value: Any, t: DataType) -> Any:
    try:
        return _from_json(value, t)
    except _Bad:
        return None


_DECODER = json.JSONDecoder()


def json_value(raw: bytes | None, t: StructType) -> dict | None:
    """One Kafka value as ``from_json(value, t)`` (PERMISSIVE) gives it, as a Python dict."""
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        text = "?"
    if not text:
        return None
    try:
        parsed, _ = _DECODER.raw_decode(text)  # Spark reads the first JSON value of the text
    except ValueError:
        parsed = None
        if "'" in text:  # Spark's JSON reader allows single-quoted strings (allowSingleQuotes)
            try:
                parsed, _ = _DECODER.raw_decode(_double_quoted(text))
            except ValueError:
                pass
    if not isinstance(parsed, dict):
        return {f.name: None for f in t.fields}
    return {f.name: _field(parsed.get(f.name), f.dataType) for f in t.fields}


def _double_quoted(text: str) -> str:
    """``text`` with its single-quoted strings written double-quoted (\\' is a quote)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':  # copy a double-quoted string as it is
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif c == "'":
            j, chars = i + 1, []
            while j < n and text[j] != "'":
                if text[j] == "\\" and j + 1 < n:
                    chars.append("'" if text[j + 1] == "'" else text[j : j + 2])
                    j += 2
                else:
                    chars.append('\\"' if text[j] == '"' else text[j])
                    j += 1
            out.append('"' + "".join(chars) + '"')
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _has_line_break(values: pa.Array) -> bool:
    """Whether any value holds a CR or LF (such a value cannot be one line of the input)."""
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)
    start, end = offsets[values.offset], offsets[values.offset + len(values)]
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)[start:end]
    return bool(np.count_nonzero(data == 10) or np.count_nonzero(data == 13))


def _joined(values: pa.Array) -> pa.Buffer:
    """The values, each followed by a newline, as one buffer (no per-value Python objects)."""
    lines = pc.binary_join_element_wise(values, pa.scalar(b""), pa.scalar(b"\n"))
    end = np.frombuffer(lines.buffers()[1], dtype=np.int32)[len(lines)]
    return lines.buffers()[2][:end]


def _slow(values: pa.Array, t: StructType) -> pa.Array:
    return pa.array([json_value(v, t) for v in values.to_pylist()], type=arrow_type(t))


def decode_json(values: pa.Array, t: StructType) -> pa.Array:
    """Binary JSON values -> a struct column of Spark type ``t`` (same length and order)."""
    wire = _json_wire_type(t)
    if wire is None or len(values) == 0:
        return _slow(values, t)
    if values.null_count == 0 and not _has_line_break(values):
        if pc.min(pc.binary_length(values)).as_py() > 0:
            return _bisect(values, t, wire)
    valid = pc.fill_null(pc.greater(pc.binary_length(values), 0), False)
    one_line = pc.invert(pc.fill_null(pc.match_substring_regex(values, "[\r\n]"), True))
    fast = pc.and_(valid, one_line).to_numpy(zero_copy_only=False)
    idx = np.arange(len(values))
    fast_idx, slow_idx = idx[fast], idx[~fast]
    parts = [_bisect(values.take(fast_idx), t, wire), _slow(values.take(slow_idx), t)]
    order = np.concatenate([fast_idx, slow_idx])
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return pa.concat_arrays(parts).take(pa.array(inverse))


def _bisect(values: pa.Array, t: StructType, wire: pa.StructType) -> pa.Array:
    n = len(values)
    if n == 0:
        return pa.array([], type=arrow_type(t))
    if n <= _SMALL:
        return _slow(values, t)
    try:
        out = _read_json(values, t, wire)
        if len(out) == n:
            return out
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    half = n // 2
    return pa.concat_arrays([_bisect(values[:half], t, wire), _bisect(values[half:], t, wire)])


def _read_json(values: pa.Array, t: StructType, wire: pa.StructType) -> pa.Array:
    table = pj.read_json(
        pa.BufferReader(_joined(values)),
        read_options=pj.ReadOptions(use_threads=False, block_size=_BLOCK),
        parse_options=pj.ParseOptions(
            explicit_schema=pa.schema(list(wire)), unexpected_field_behavior="ignore"
        ),
    )
    arr = table.select([f.name for f in wire]).to_struct_array().combine_chunks()
    if not isinstance(arr, pa.StructArray):  # zero chunks
        arr = pa.array([], type=wire)
    target = arrow_type(t)
    return arr.cast(target) if wire != target else arr


def _json_text(value: Any, t: pa.DataType) -> Any:
    """A Python value of Arrow type ``t`` as to_json writes it, as a JSON-able object
    (the per-value path, for values inside arrays and maps)."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {
            f.name: _json_text(value[f.name], f.type) for f in t if value.get(f.name) is not None
        }
    if pa.types.is_map(t):
        return {str(k): _json_text(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_json_text(v, t.value_type) for v in value]
    if pa.types.is_timestamp(t):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + ("Z" if t.tz is not None else "")
    if pa.types.is_date(t):
        return value.isoformat()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return base64.b64encode(value).decode()
    if pa.types.is_floating(t):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return _Raw(_java_float(value, pa.types.is_float32(t)))
    if pa.types.is_decimal(t):
        return _Raw(str(value))
    return value


def _java_float(value: float, single: bool) -> str:
    """A finite float as Java's Double/Float.toString writes it (Spark's to_json): plain
    for 1e-3 <= |x| < 1e7 (with a ".0" if whole), else ``d.dddE<n>``; shortest digits."""
    text = str(np.float32(value)) if single else repr(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        if "e" in text:  # float32's str switches to exponents at other bounds
            text = format(decimal.Decimal(text), "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = decimal.Decimal(text).normalize().as_tuple()
    shown = "".join(map(str, digits))
    power = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


class _Raw(str):
    """Text written into the JSON as is (decimals keep their scale, floats their width)."""


def _dump(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dump(k)}:{_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


_NEEDS_ESCAPE = '["\\\x00-\x1f]'


def _join(*parts: Any) -> pa.Array:
    """Concatenate strings element-wise (null if any part is null)."""
    return pc.binary_join_element_wise(*parts, pa.scalar(""))


def _json_column(arr: pa.Array) -> pa.Array:
    """Each value of ``arr`` as to_json writes it (string; null stays null), column-wise:
    only strings that need escaping, binary, and arrays/maps go value by value."""
    t = arr.type
    n = len(arr)
    if pa.types.is_struct(t):
        # ',"name":value' per field, "" where null (null fields are left out), all joined,
        # then the first comma dropped. (binary_join_element_wise's null_handling="skip"
        # drops whole rows where every input is null: pyarrow 26 returns a shorter array.)
        parts = [
            pc.fill_null(
                _join(pa.scalar("," + json.dumps(f.name, ensure_ascii=False) + ":"), _json_column(child)),
                "",
            )
            for f, child in zip(t, arr.flatten(), strict=True)
        ]
        body = _join(*parts) if parts else pa.array([""] * n)
        body = pc.replace_substring_regex(body, "^,", "")
        return pc.if_else(arr.is_valid(), _join("{", body, "}"), pa.scalar(None, pa.string()))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if not pc.any(pc.match_substring_regex(arr, _NEEDS_ESCAPE)).as_py():
            return _join('"', arr.cast(pa.string()), '"')
    elif pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
        return arr.cast(pa.string())
    elif pa.types.is_date(t):
        return _join('"', arr.cast(pa.date32()).cast(pa.string()), '"')
    elif pa.types.is_timestamp(t):
        ms = arr.cast(pa.timestamp("ms", tz=t.tz), safe=False)
        zone = 'Z"' if t.tz is not None else '"'
        return _join('"', pc.strftime(ms, "%Y-%m-%dT%H:%M:%S"), zone)
    elif pa.types.is_floating(t):
        text = arr.cast(pa.string())
        whole = pc.fill_null(pc.match_substring_regex(text, "^-?[0-9]+$"), False)
        text = pc.if_else(whole, _join(text, ".0"), text)  # 1.0 as Java writes it, not 1
        size = pc.abs(arr)
        odd = pc.fill_null(
            pc.or_(
                pc.or_(pc.greater_equal(size, 1e7), pc.is_nan(arr)),
                pc.and_(pc.less(size, 1e-3), pc.not_equal(size, 0)),
            ),
            False,
        )  # NaN, infinities and exponent notation: value by value
        if pc.any(odd).as_py():
            rare = [_dump(_json_text(v, t)) for v in pc.filter(arr, odd).to_pylist()]
            text = pc.replace_with_mask(text, odd, pa.array(rare, pa.string()))
        return text
    return pa.array(
        [None if v is None else _dump(_json_text(v, t)) for v in arr.to_pylist()], pa.string()
    )


def encode_json(column: pa.Array) -> pa.Array:
    """A struct column -> binary JSON values (a null struct -> a null value)."""
    return _json_column(column).cast(pa.binary())
