"""Every generated message, at every valid version, round-trips.

Strategies come from the same specs as the generated code
(``tools.codegen.strategies``): random values for every field on the wire
at the version, junk in the fields that are not (encoding must drop them).
Decoding the encoding gives the expected message back, consumes exactly the
encoded bytes (also at a non-zero offset), and re-encodes to the same bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.protocol import _generated as generated
from tools.codegen.schema import load_specs
from tools.codegen.strategies import message_class, message_pairs

SPECS = load_specs()
CASES = [(spec, v) for spec in SPECS for v in spec.valid.range()]
SETTINGS = settings(max_examples=10, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_every_spec_is_generated_and_registered() -> None:
    assert {s.name for s in SPECS} == set(generated.MESSAGES)
    for spec in SPECS:
        cls = message_class(spec)
        assert cls.VALID_VERSIONS == spec.valid.as_tuple()
        assert sorted(cls._DECODERS) == list(spec.valid.range())
        assert sorted(cls._ENCODERS) == list(spec.valid.range())
        if spec.kind == 'request':
            entry = generated.API_BY_KEY[spec.api_key]
            assert entry.request is cls
            assert entry.valid_versions == spec.valid.as_tuple()


@pytest.mark.parametrize(('spec', 'version'), CASES,
                         ids=[f'{s.name}-v{v}' for s, v in CASES])
def test_roundtrip(spec, version: int) -> None:
    cls = message_class(spec)

    @SETTINGS
    @given(pair=message_pairs(spec, version), prefix=st.binary(max_size=3))
    def check(pair, prefix: bytes) -> None:
        actual, expected = pair
        data = actual.to_bytes(version)
        decoded, end = cls.decode(memoryview(data), 0, version)
        assert end == len(data)
        assert decoded == expected
        assert decoded.to_bytes(version) == data
        # at an offset inside a larger buffer, with trailing bytes
        shifted, end = cls.decode(memoryview(prefix + data + b'\x7f'), len(prefix), version)
        assert end == len(prefix) + len(data)
        assert shifted == expected

    check()
