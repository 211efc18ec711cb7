"""Every metadata record type at every version, and every KRaft control record,
round-trips through spool.protocol.metadata_records.

Random contents come from the codegen strategies (as in test_codec_roundtrip);
the frame's three uvarints must come back as written and the body must be
exactly the generated encoding at that version.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from spool.protocol.metadata_records import (
    CONTROL_RECORD_CLASSES,
    CONTROL_VALUE_VERSION,
    decode_control_record,
    decode_record,
    encode_control_record,
    encode_record,
)
from spool.protocol.primitives import write_uvarint
from tools.codegen.schema import specs_by_name
from tools.codegen.strategies import message_pairs

SPECS = specs_by_name()
RECORD_CASES = [(spec, v) for spec in SPECS.values() if spec.kind == 'metadata'
                for v in spec.valid.range()]
CONTROL_SPECS = [SPECS[cls.NAME] for cls in CONTROL_RECORD_CLASSES.values()]
SETTINGS = settings(max_examples=15, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize(('spec', 'version'), RECORD_CASES,
                         ids=[f'{s.name}-v{v}' for s, v in RECORD_CASES])
def test_metadata_record_roundtrip(spec, version: int) -> None:
    @SETTINGS
    @given(pair=message_pairs(spec, version))
    def check(pair) -> None:
        actual, expected = pair
        data = encode_record(actual, version)
        frame = write_uvarint(1) + write_uvarint(spec.api_key) + write_uvarint(version)
        assert data == frame + actual.to_bytes(version)
        assert decode_record(data) == (expected, version)

    check()


@pytest.mark.parametrize('spec', CONTROL_SPECS, ids=[s.name for s in CONTROL_SPECS])
def test_control_record_roundtrip(spec) -> None:
    @SETTINGS
    @given(pair=message_pairs(spec, CONTROL_VALUE_VERSION))
    def check(pair) -> None:
        actual, expected = pair
        key, value = encode_control_record(actual)
        assert value == actual.to_bytes(CONTROL_VALUE_VERSION)
        assert decode_control_record(key, value) == expected

    check()
