"""The error-code version table (spool.protocol.error_versions): Kafka's downgrades for
older versions, the allowed sets, and the rewrite of a whole response."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from spool.protocol import error_versions as ev
from spool.protocol._generated import (
    API_BY_KEY,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    FetchResponse,
    InitProducerIdResponse,
    ProduceResponse,
    TxnOffsetCommitResponse,
)
from spool.protocol._generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnTopicResult,
)
from spool.protocol.errors import Errors as E
from spool.protocol.message import Message
from tools.codegen.schema import specs_by_name
from tools.codegen.strategies import message_pairs

SPECS = specs_by_name()

FENCED, EPOCH = E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH


def _apt(code: int) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
        AddPartitionsToTxnTopicResult(name="t", results_by_partition=[
            AddPartitionsToTxnPartitionResult(partition_index=i, partition_error_code=code)
            for i in range(2)])])


def _apt_codes(resp: AddPartitionsToTxnResponse) -> list[int]:
    return [p.partition_error_code for t in resp.results_by_topic_v3_and_below
            for p in t.results_by_partition]


@pytest.mark.parametrize(("version", "expected"), [(0, EPOCH), (1, EPOCH), (2, FENCED), (3, FENCED)])
def test_add_partitions_to_txn_fenced_below_v2_is_invalid_producer_epoch(version, expected):
    resp = _apt(FENCED)
    if ev.needs_downgrade(24, version):
        ev.downgrade(24, version, resp)
    assert _apt_codes(resp) == [expected, expected]
    # and on the wire: a v0 client decodes 47
    wire = AddPartitionsToTxnResponse.from_bytes(resp.to_bytes(version), version)
    assert _apt_codes(wire) == [expected, expected]


@pytest.mark.parametrize(("api", "cls", "first_fenced"), [
    (22, InitProducerIdResponse, 4), (26, EndTxnResponse, 2)])
def test_top_level_fenced(api, cls, first_fenced):
    for version in range(cls.VALID_VERSIONS[1] + 1):
        resp = cls(error_code=FENCED)
        ev.downgrade(api, version, resp)
        assert resp.error_code == (FENCED if version >= first_fenced else EPOCH), version


def test_txn_offset_commit_never_carries_producer_fenced():
    for version in range(TxnOffsetCommitResponse.VALID_VERSIONS[1] + 1):
        assert ev.needs_downgrade(28, version)
        resp = TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
            name="t", partitions=[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                partition_index=0, error_code=FENCED)])])
        ev.downgrade(28, version, resp)
        assert ev.error_codes(resp) == [EPOCH]


def test_transaction_abortable_is_invalid_txn_state_for_old_produce():
    part = ProduceResponse.PartitionProduceResponse
    resp = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[part(index=0, error_code=E.TRANSACTION_ABORTABLE),
                                       part(index=1, error_code=E.NOT_LEADER_OR_FOLLOWER)])])
    ev.downgrade(0, 10, resp)
    assert ev.error_codes(resp) == [E.INVALID_TXN_STATE, E.NOT_LEADER_OR_FOLLOWER]
    assert not ev.needs_downgrade(0, 11)


def test_fetch_storage_error_below_v6_is_not_leader():
    part = FetchResponse.PartitionData
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[part(partition_index=0, error_code=E.KAFKA_STORAGE_ERROR)])])
    ev.downgrade(1, 5, resp)
    assert ev.error_codes(resp) == [0, E.NOT_LEADER_OR_FOLLOWER]  # top-level, partition
    assert not ev.needs_downgrade(1, 6)


def test_no_look_at_versions_that_need_no_mapping():
    assert not ev.needs_downgrade(3, 0)  # Metadata: no downgrade at all
    assert not ev.needs_downgrade(24, 5)
    assert ev.needs_downgrade(24, 4)  # TRANSACTION_ABORTABLE is v5+


def test_every_downgrade_agrees_with_the_allowed_table():
    """Below ``since`` the code is not allowed and the fallback is; from ``since`` it is."""
    for api, downs in ev.DOWNGRADES.items():
        for d in downs:
            for version in range(0, min(d.since, 20)):
                ok = ev.allowed(api, version)
                assert ok is not None, api
                assert d.code not in ok, (api, version, d)
                if ev.ERRORS[api].get(d.fallback, 0) <= version:  # ILLEGAL_GENERATION is v1+
                    assert d.fallback in ok, (api, version, d)
                else:
                    assert d.fallback in ev.ALWAYS or d.fallback in ev.ERRORS[api], (api, d)
            if d.since != ev.NEVER:
                assert d.code in ev.allowed(api, d.since), (api, d)


def test_allowed_grows_with_the_version():
    for api in ev.ERRORS:
        prev = ev.allowed(api, 0)
        for version in range(1, 20):
            cur = ev.allowed(api, version)
            assert prev <= cur, api
            prev = cur
    assert ev.allowed(9999, 0) is None


@pytest.mark.parametrize("plane", ["broker", "controller"])
def test_every_advertised_api_is_audited(plane):
    """The round trip (tests/integration/test_api_roundtrip.py) checks a response's codes
    only for an audited API: an API served without a row here would pass it unchecked."""
    import spool.broker.handlers  # noqa: F401  (registers them)
    from spool.broker.registry import advertised

    served = advertised(plane)
    assert served
    assert [(key, hi) for key, _, hi in served if ev.allowed(key, hi, plane) is None] == []


def _every_error_code(msg) -> list[int]:
    """Brute force: every ``*error_code`` int anywhere under ``msg``."""
    out = []
    for name in type(msg).__slots__:
        value = getattr(msg, name)
        if name.endswith("error_code") and isinstance(value, int) and not isinstance(value, bool):
            out.append(value)
        elif isinstance(value, Message):
            out += _every_error_code(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    out += _every_error_code(item)
    return out


RESPONSES = sorted(e.response.NAME for e in API_BY_KEY.values())


@pytest.mark.parametrize("name", RESPONSES)
def test_the_walk_reaches_every_error_code(name):
    """downgrade() and error_codes() find their fields from the generated classes'
    annotations: they must reach every ``*error_code`` of every response, at its newest
    version, whatever the codegen writes."""
    spec = SPECS[name]

    @settings(max_examples=5, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(pair=message_pairs(spec, spec.valid.hi))
    def check(pair):
        msg = pair[1]
        assert sorted(ev.error_codes(msg)) == sorted(_every_error_code(msg))

    check()
