"""The few fields of OpenTelemetry's ``MetricsData`` protobuf (OTLP v1) a reader wants.

PushTelemetry (KIP-714) carries ``MetricsData`` bytes. ``decode_metrics(data)`` walks
the protobuf wire format (no schema compiler, no dependency) and returns one
``DataPoint`` per number data point::

    MetricsData    1: ResourceMetrics*
    ResourceMetrics 1: Resource (1: KeyValue* attributes)   2: ScopeMetrics*
    ScopeMetrics   2: Metric*
    Metric         1: name  5: Gauge  7: Sum  9: Histogram  (1: data points each)
    NumberDataPoint 3: time_unix_nano (fixed64)  4: as_double  6: as_int (sfixed64)
                    7: KeyValue* attributes
    HistogramDataPoint 4: count (fixed64)  5: sum (double)
    KeyValue       1: key  2: AnyValue (1: string  2: bool  3: int  4: double)

A histogram point's value is its count. Fields it does not know are skipped, as
protobuf readers do; malformed input raises ``ValueError``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


@dataclass(frozen=True)
class DataPoint:
    name: str
    kind: str  # gauge | sum | histogram
    value: float | int
    time_unix_nano: int = 0
    attributes: dict[str, object] = field(default_factory=dict)
    resource: dict[str, object] = field(default_factory=dict)


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes | memoryview) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value): an int, 8 raw bytes, or a memoryview (LEN)."""
    buf = memoryview(data)
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _I64:
            value, pos = bytes(buf[pos:pos + 8]), pos + 8
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == _I32:
            value, pos = bytes(buf[pos:pos + 4]), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated field")
        yield num, wire, value


def _attributes(kvs: list) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in kvs:
        key, value = "", None
        for num, _w, v in _fields(kv):
            if num == 1:
                key = bytes(v).decode()
            elif num == 2:
                for n2, _w2, v2 in _fields(v):
                    if n2 == 1:
                        value = bytes(v2).decode()
                    elif n2 in (2, 3):
                        value = bool(v2) if n2 == 2 else _signed(v2)
                    elif n2 == 4:
                        value = struct.unpack("<d", v2)[0]
        out[key] = value
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _point(name: str, kind: str, data: memoryview, resource: dict) -> DataPoint:
    histogram = kind == "histogram"
    attrs_field = 9 if histogram else 7
    value: float | int = 0
    t, attrs = 0, []
    for num, _w, v in _fields(data):
        if num == 3:
            t = struct.unpack("<Q", v)[0]
        elif num == attrs_field:
            attrs.append(v)
        elif num == 4:  # a histogram's count, a number's as_double
            value = struct.unpack("<Q" if histogram else "<d", v)[0]
        elif num == 6 and not histogram:
            value = struct.unpack("<q", v)[0]
    return DataPoint(name, kind, value, t, _attributes(attrs), resource)


_KINDS = {5: "gauge", 7: "sum", 9: "histogram"}


def decode_metrics(data: bytes | memoryview) -> list[DataPoint]:
    """Every number/histogram data point in a ``MetricsData`` message (module doc)."""
    out: list[DataPoint] = []
    for num, _w, rm in _fields(data):
        if num != 1:
            continue
        resource: dict[str, object] = {}
        scopes = []
        for n2, _w2, v2 in _fields(rm):
            if n2 == 1:
                resource = _attributes([v for n3, _w3, v in _fields(v2) if n3 == 1])
            elif n2 == 2:
                scopes.append(v2)
        for scope in scopes:
            for n3, _w3, metric in _fields(scope):
                if n3 == 2:
                    out += _metric(metric, resource)
    return out


def _metric(data: memoryview, resource: dict) -> list[DataPoint]:
    name, points = "", []
    for num, _w, v in _fields(data):
        if num == 1:
            name = bytes(v).decode()
        elif num in _KINDS:
            points += [(_KINDS[num], p) for n, _w2, p in _fields(v) if n == 1]
    return [_point(name, kind, p, resource) for kind, p in points]
