"""Valid request frames of every API and version, for the frame fuzzer to mutate.

``build_seeds(rng, per_version, supported)`` walks every request spec (the
JSON specs ``tools.codegen`` generated ``spool.protocol._generated`` from),
and for each API key and each version in its valid range fills the fields
present at that version with plausible values: a few shared topic names,
partitions 0-2, short timeouts (so nothing parks a connection for long),
real RecordBatch v2 payloads in ``records`` fields. Each seed is a
``Seed(api_key, version, payload)`` where ``payload`` is the request header
and body without the 4-byte size prefix. ``supported`` (api key -> (lo, hi)
from the broker's ApiVersions) marks which seeds the broker claims to serve.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, NamedTuple

from spool.protocol._generated import API_BY_KEY
from spool.protocol.headers import encode_request_header
from spool.protocol.primitives import ZERO_UUID
from spool.records.builder import BatchBuilder
from spool.records.compression import GZIP, NONE
from tools.codegen.schema import FieldSpec, MessageSpec, StructSpec, load_specs
from tools.codegen.strategies import struct_class

TOPICS = ["fz-a", "fz-b", "fz-c"]
CONFIGS = [("cleanup.policy", "compact"), ("retention.ms", "60000"),
           ("max.message.bytes", "1048576"), ("segment.ms", "600000")]


class Seed(NamedTuple):
    api_key: int
    version: int
    supported: bool
    payload: bytes


def _batches(rng: random.Random) -> list[bytes]:
    out = []
    for codec in (NONE, NONE, GZIP):
        for pid in (-1, 7):
            b = BatchBuilder(compression=codec, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                             base_sequence=0 if pid >= 0 else -1)
            for i in range(rng.randint(1, 3)):
                b.append(b"k%d" % i, b"fuzz-%d" % rng.randrange(1000), timestamp=1_700_000_000_000 + i)
            out.append(b.build())
    return out


class _Filler:
    def __init__(self, rng: random.Random, spec: MessageSpec, version: int,
                 batches: list[bytes]) -> None:
        self.rng = rng
        self.spec = spec
        self.version = version
        self.batches = batches

    def struct(self, struct: StructSpec) -> Any:
        cls = struct_class(self.spec, struct)
        values: dict[str, Any] = {}
        for f in struct.fields:
            if self.version not in f.versions:
                continue
            if f.is_tagged_at(self.version) and self.rng.random() < 0.5:
                continue
            values[f.attr] = self.field(f, struct)
        return cls(**values)

    def field(self, f: FieldSpec, owner: StructSpec) -> Any:
        rng = self.rng
        nullable = f.is_nullable_at(self.version)
        if nullable and rng.random() < 0.08:
            return None
        if f.is_array:
            n = rng.choice((0, 1, 1, 1, 2, 3))
            if f.struct is not None:
                return [self.struct(f.struct) for _ in range(n)]
            return [self.scalar(f, owner) for _ in range(n)]
        if f.struct is not None:
            return self.struct(f.struct)
        return self.scalar(f, owner)

    def scalar(self, f: FieldSpec, owner: StructSpec) -> Any:  # noqa: C901 - one table
        rng = self.rng
        name = f.attr
        elem = f.elem
        if elem == "string":
            if "group" in name:
                return "fz-group"
            if "transactional" in name:
                return "fz-txn"
            if name == "member_id":
                return rng.choice(("", "fz-member"))
            if name == "protocol_type":
                return "consumer"
            if "Config" in owner.name or "config" in name:
                k, v = rng.choice(CONFIGS)
                return k if name in ("name", "key", "config_name") else v
            return rng.choice(TOPICS)
        if elem in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            if name == "acks":
                return rng.choice((-1, 1))
            if name in ("num_partitions", "count"):
                return rng.randint(1, 3)
            if name == "replication_factor":
                return rng.choice((1, -1))
            if "partition" in name or name.endswith("index") or name == "partitions":
                return rng.randint(0, 2)
            if "timeout" in name or "wait" in name:
                return rng.randint(0, 50)
            if name == "producer_id":
                return rng.choice((-1, 0, 1, 1000))
            if "epoch" in name:
                return rng.choice((-1, 0, 1))
            if "offset" in name:
                return rng.choice((0, -1, -2, 3))
            if name.endswith("max_bytes"):
                return rng.choice((1 << 10, 1 << 20))
            if "isolation" in name or "type" in name:
                return rng.randint(0, 1)
            if elem in ("uint16", "uint32"):
                return rng.randint(0, 100)
            return rng.choice((0, 1, -1, rng.randint(0, 100)))
        if elem == "bool":
            return rng.random() < 0.5
        if elem == "float64":
            return rng.random()
        if elem == "bytes":
            return rng.randbytes(rng.randint(0, 16))
        if elem == "records":
            return rng.choice(self.batches)
        if elem == "uuid":
            return ZERO_UUID if rng.random() < 0.7 else uuid.UUID(int=rng.getrandbits(128))
        raise ValueError(elem)


def build_seeds(rng: random.Random, per_version: int,
                supported: dict[int, tuple[int, int]]) -> list[Seed]:
    batches = _batches(rng)
    seeds: list[Seed] = []
    cid = 1
    for spec in load_specs():
        if spec.kind != "request" or spec.api_key not in API_BY_KEY:
            continue
        for version in spec.valid.range():
            lo, hi = supported.get(spec.api_key, (0, -1))
            for _ in range(per_version):
                body = _Filler(rng, spec, version, batches).struct(spec.root)
                try:
                    raw = body.to_bytes(version)
                except Exception:  # noqa: BLE001 - a value the version cannot carry: skip it
                    continue
                header = encode_request_header(spec.api_key, version, cid, "fuzz",
                                               spec.is_flexible(version))
                cid += 1
                seeds.append(Seed(spec.api_key, version, lo <= version <= hi, header + raw))
    return seeds
