"""Option parsing, range planning and admission control, without a SparkSession."""

from __future__ import annotations

import json

import pytest

from spool.spark.cluster import from_json, to_json
from spool.spark.options import parse_options
from spool.spark.ranges import plan
from spool.spark.stream_reader import rate_limit

BS = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_options_use_sparks_kafka_names_case_insensitively():
    o = parse_options(
        {**BS, "SUBSCRIBE": "a, b", "startingOffsets": '{"a": {"0": 5}}', "maxOffsetsPerTrigger": "10",
         "kafka.isolation.level": "read_committed", "kafka.client.id": "me", "failOnDataLoss": "false",
         "includeHeaders": "true", "minPartitions": "4"},
        for_read=True, streaming=True,
    )
    assert o.subscribe == ("a", "b")
    assert o.starting.kind == "offsets" and o.starting.per_partition == {"a": {0: 5}}
    assert (o.max_offsets_per_trigger, o.min_partitions) == (10, 4)
    assert (o.isolation_level, o.fail_on_data_loss, o.include_headers) == ("read_committed", False, True)
    assert o.base_conf() == {"bootstrap.servers": "127.0.0.1:1", "enable.metrics.push": False,
                             "client.id": "me"}
    assert parse_options({"bootstrap.servers": "h:1", "subscribePattern": "x.*"}, for_read=True).matches("xy")


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({}, "kafka.bootstrap.servers is required"),
        ({**BS}, "exactly one of"),
        ({**BS, "subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of"),
        ({**BS, "assign": "[1]"}, "assign must be JSON"),
        ({**BS, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({**BS, "subscribe": "a", "kafka.group.id": "g"}, "kafka.group.id is not supported"),
        ({**BS, "subscribe": "a", "startingOffsets": "latest"}, "not valid for batch"),
        ({**BS, "subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({**BS, "subscribe": "a", "startingTimestamp": "noon"}, "startingTimestamp"),
    ],
)
def test_bad_options_name_the_option(opts, message):
    with pytest.raises(ValueError, match=message):
        parse_options(opts, for_read=True)


def test_offsets_json_is_stable_ordered():
    offsets = {"b": {10: 1, 2: 3}, "a": {1: 0}}
    text = json.dumps(to_json(offsets))
    assert text == '{"a": {"1": 0}, "b": {"2": 3, "10": 1}}'
    assert from_json(json.loads(text)) == offsets


def test_plan_one_range_per_partition_and_split_by_min_partitions():
    starts, ends = {"t": {0: 0, 1: 10, 2: 5}}, {"t": {0: 100, 1: 10, 2: 7}}
    ranges = plan(starts, ends, None)
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 0, 100), (2, 5, 7)]
    split = plan(starts, ends, 10)
    assert len(split) >= 10
    covered = sorted((r.partition, o) for r in split for o in range(r.start, r.end))
    assert covered == [(0, o) for o in range(100)] + [(2, 5), (2, 6)]


def test_rate_limit_admits_at_most_max_rows_in_proportion():
    begin, until = {"t": {0: 0, 1: 0, 2: 50}}, {"t": {0: 90, 1: 10, 2: 50}}
    got = rate_limit(begin, until, 20)
    assert sum(got["t"][p] - begin["t"][p] for p in range(3)) == 20
    assert got["t"] == {0: 18, 1: 2, 2: 50}
    assert rate_limit(begin, until, 1000) == until
