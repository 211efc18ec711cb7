"""Malformed input: decoders raise ProtocolDecodeError and nothing else.

Random bytes, truncated valid encodings and valid encodings with flipped or
overwritten bytes are fed to the generated decoders. A decode may succeed
(a mutation can yield another valid message) but any failure must be a
``ProtocolDecodeError`` — never ``IndexError``, ``struct.error``,
``UnicodeDecodeError`` or a huge allocation from a hostile length.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.protocol.primitives import ProtocolDecodeError
from tools.codegen.schema import specs_by_name
from tools.codegen.strategies import message_class, message_pairs

SPECS = specs_by_name()
TARGETS = [
    ('ProduceRequest', (0, 3, 9, 13)), ('ProduceResponse', (0, 9, 10)),
    ('FetchRequest', (4, 12, 15)), ('FetchResponse', (4, 11, 12, 16)),
    ('MetadataRequest', (0, 9, 12)), ('MetadataResponse', (1, 9, 12)),
    ('ApiVersionsRequest', (0, 3)), ('ApiVersionsResponse', (0, 3)),
    ('JoinGroupRequest', (0, 6)), ('SyncGroupRequest', (5,)),
    ('OffsetCommitRequest', (2, 8)), ('CreateTopicsRequest', (2, 5)),
    ('DescribeTopicPartitionsResponse', (0,)), ('ConsumerProtocolSubscription', (0, 3)),
    ('VoteRequest', (0, 2)), ('FetchSnapshotResponse', (1,)), ('BrokerRegistrationRequest', (4,)),
    ('PartitionRecord', (0, 2)), ('RegisterBrokerRecord', (3,)), ('VotersRecord', (0,)),
]
CASES = [(name, v) for name, versions in TARGETS for v in versions]
IDS = [f'{n}-v{v}' for n, v in CASES]
FUZZ = settings(max_examples=30, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _decode(cls: type, data: bytes, version: int) -> None:
    try:
        cls.decode(memoryview(data), 0, version)
    except ProtocolDecodeError:
        pass


@pytest.mark.parametrize(('name', 'version'), CASES, ids=IDS)
def test_random_bytes(name: str, version: int) -> None:
    cls = message_class(SPECS[name])

    @FUZZ
    @given(data=st.binary(max_size=64))
    def check(data: bytes) -> None:
        _decode(cls, data, version)

    check()


@pytest.mark.parametrize(('name', 'version'), CASES, ids=IDS)
def test_mutated_encodings(name: str, version: int) -> None:
    spec = SPECS[name]
    cls = message_class(spec)

    @FUZZ
    @given(pair=message_pairs(spec, version), cut=st.integers(0, 10_000),
           flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=4),
           big=st.sampled_from([b'\x7f\xff\xff\xff', b'\xff\xff\xff\xfe', b'\xff\xff\xff\xff\x0f',
                                b'\x80\x80\x80\x80\x80\x80']))
    def check(pair, cut: int, flips: list[tuple[int, int]], big: bytes) -> None:
        data = pair[0].to_bytes(version)
        _decode(cls, data[:cut % (len(data) + 1)], version)
        if not data:
            return
        flipped = bytearray(data)
        for pos, mask in flips:
            flipped[pos % len(data)] ^= mask
        _decode(cls, bytes(flipped), version)
        at = cut % len(data)
        _decode(cls, data[:at] + big + data[at + len(big):], version)

    check()


def test_every_message_survives_garbage() -> None:
    """A cheap deterministic sweep over every (message, version)."""
    rng = random.Random(1234)
    for spec in SPECS.values():
        cls = message_class(spec)
        for version in spec.valid.range():
            valid = cls().to_bytes(version)
            for cut in range(len(valid)):
                _decode(cls, valid[:cut], version)
            for _ in range(10):
                _decode(cls, rng.randbytes(rng.randrange(40)), version)
                _decode(cls, b'\xff' * rng.randrange(1, 12), version)
