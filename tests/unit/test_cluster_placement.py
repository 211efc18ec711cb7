"""Replica placement: rack-aware, leaders spread, Kafka's INVALID_REPLICATION_FACTOR."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from spool.cluster.placement import UsableBroker, place
from spool.protocol.errors import Errors, KafkaError

RACKS = [UsableBroker(b, r) for b, r in
         [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]]
RACK_OF = {b.broker_id: b.rack for b in RACKS}


@pytest.mark.parametrize("seed", range(20))
def test_three_racks_of_two_give_every_partition_three_racks(seed):
    out = place(RACKS, 60, 3, random.Random(seed))
    assert len(out) == 60
    for replicas in out:
        assert len(set(replicas)) == 3
        assert {RACK_OF[b] for b in replicas} == {"a", "b", "c"}
    assert Counter(r[0] for r in out) == {b: 10 for b in range(1, 7)}  # leaders spread
    assert Counter(b for r in out for b in r) == {b: 30 for b in range(1, 7)}


@pytest.mark.parametrize("seed", range(10))
def test_two_racks_and_replication_factor_three_use_both_racks(seed):
    brokers = [UsableBroker(b, "a" if b <= 2 else "b") for b in range(1, 5)]
    for replicas in place(brokers, 12, 3, random.Random(seed)):
        assert len(set(replicas)) == 3
        assert {"a", "b"} == {"a" if b <= 2 else "b" for b in replicas}


def test_without_racks_leaders_and_replicas_spread_evenly():
    brokers = [UsableBroker(b) for b in range(5)]
    out = place(brokers, 50, 2, random.Random(3))
    assert Counter(r[0] for r in out) == {b: 10 for b in range(5)}
    assert all(len(set(r)) == 2 for r in out)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("brokers, rf", [(3, 3), (3, 2), (4, 4), (1, 1)])
def test_as_many_replicas_as_brokers_still_spreads_leaders(seed, brokers, rf):
    """Each partition starts one broker further (Kafka's BrokerList offset per epoch): with
    3 brokers and 3 replicas every broker leads a third (before: one led them all)."""
    out = place([UsableBroker(b) for b in range(1, brokers + 1)], 6 * brokers, rf,
                random.Random(seed))
    assert Counter(r[0] for r in out) == {b: 6 for b in range(1, brokers + 1)}
    assert all(len(set(r)) == rf for r in out)


def test_leaders_are_never_fenced():
    brokers = [UsableBroker(1, "a"), UsableBroker(2, "b", fenced=True), UsableBroker(3, "c")]
    for seed in range(10):
        out = place(brokers, 9, 3, random.Random(seed))
        assert all(r[0] != 2 for r in out)
        assert all(sorted(r) == [1, 2, 3] for r in out)


def test_within_a_rack_unfenced_brokers_go_first():
    brokers = [UsableBroker(1, "a"), UsableBroker(2, "a", fenced=True), UsableBroker(3, "b"),
               UsableBroker(4, "b", fenced=True)]
    for seed in range(10):
        assert all(sorted(r) == [1, 3] for r in place(brokers, 8, 2, random.Random(seed)))


def test_not_enough_brokers_is_invalid_replication_factor_with_kafkas_words():
    with pytest.raises(KafkaError) as e:
        place(RACKS[:2], 1, 3, random.Random(0))
    assert e.value.code == Errors.INVALID_REPLICATION_FACTOR
    assert e.value.message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 "
        "cannot be reached because only 2 broker(s) are registered.")


def test_all_fenced_is_invalid_replication_factor():
    with pytest.raises(KafkaError) as e:
        place([UsableBroker(1, fenced=True)], 1, 1, random.Random(0))
    assert e.value.code == Errors.INVALID_REPLICATION_FACTOR
    assert "fenced" in e.value.message


def test_same_seed_same_placement():
    assert place(RACKS, 10, 2, random.Random(5)) == place(RACKS, 10, 2, random.Random(5))
