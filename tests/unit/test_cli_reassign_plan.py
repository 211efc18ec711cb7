"""``spool reassign``'s plan: Kafka's reassignment JSON read as kafka-reassign-partitions
reads it, and every malformed plan refused with one reason and exit 2 before anything
is sent."""

from __future__ import annotations

import json

import pytest

from spool.cli.common import CliError
from spool.cli.reassign import parse_plan, plan_json


def test_kafkas_format_round_trips():
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 1, "replicas": [3, 1, 2],
         "log_dirs": ["any", "any", "any"]},
        {"topic": "orders", "partition": 0, "replicas": [2]}]})
    plan = parse_plan(text)
    assert plan == {("orders", 1): [3, 1, 2], ("orders", 0): [2]}
    assert plan_json(plan) == {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [2], "log_dirs": ["any"]},
        {"topic": "orders", "partition": 1, "replicas": [3, 1, 2],
         "log_dirs": ["any", "any", "any"]}]}
    assert parse_plan(json.dumps(plan_json(plan))) == plan
    # version may be left out (Kafka's default is 1)
    assert parse_plan('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}') == {
        ("t", 0): [1]}


@pytest.mark.parametrize(("text", "reason"), [
    ("{", "not JSON"),
    ("[]", "expected a JSON object"),
    ('{"version": 2, "partitions": []}', "not supported version field value 2"),
    ('{"version": 1}', "partition reassignment list cannot be empty"),
    ('{"version": 1, "partitions": []}', "partition reassignment list cannot be empty"),
    ('{"partitions": [{"partition": 0, "replicas": [1]}]}', '"topic" must be'),
    ('{"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}', '"partition" must'),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}',
     "t-0: partition replica list cannot be empty"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": ["1"]}]}',
     '"replicas" must be a list of broker ids'),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}',
     "duplicate replica in [1, 1]"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]}',
     "size of replicas list [1, 2] is different from size of log dirs list"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}',
     "log_dirs other than \"any\" are not supported"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
     ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
     "duplicate topic partitions: t-0"),
])
def test_a_malformed_plan_is_refused_with_its_reason(text, reason):
    with pytest.raises(CliError) as e:
        parse_plan(text, "plan.json")
    assert e.value.code == 2
    assert str(e.value).startswith("plan.json: ")
    assert reason in str(e.value)
