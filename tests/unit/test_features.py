"""spool.cluster.features: Kafka's FeatureControlManager rules, on the table Spool claims."""

from __future__ import annotations

import pytest

from spool.cluster import features as ft
from spool.protocol.errors import Errors, KafkaError

U, SAFE, UNSAFE = ft.UPGRADE, ft.SAFE_DOWNGRADE, ft.UNSAFE_DOWNGRADE
MV = ft.METADATA_VERSION
TV = ft.TRANSACTION_VERSION


def plan(finalized, *updates, brokers=()):
    return ft.plan_update(finalized, [ft.FeatureUpdate(*u) for u in updates], node_id=1,
                          brokers=brokers)


def refused(finalized, *updates, brokers=()) -> str:
    with pytest.raises(KafkaError) as e:
        plan(finalized, *updates, brokers=brokers)
    assert e.value.code == Errors.INVALID_UPDATE_VERSION
    return e.value.message


def test_the_table_advertises_claimed_levels_only():
    assert ft.supported() == [(MV, 14, 14), (TV, 0, 2)]
    assert ft.bootstrap_levels() == {}
    assert ft.bootstrap_records({}) == [(MV, 14)]
    assert ft.bootstrap_records({MV: 14}) == []


def test_upgrades_downgrades_and_removal():
    assert plan({MV: 14}, (TV, 2, U)) == [(TV, 2)]
    assert plan({MV: 14, TV: 2}, (TV, 0, SAFE)) == [(TV, 0)]
    assert plan({MV: 14, TV: 2}, (TV, 1, UNSAFE)) == [(TV, 1)]
    assert plan({MV: 14}, (MV, 14, U)) == [(MV, 14)]  # the same level again: written again
    assert refused({MV: 14, TV: 2}, (TV, 1, U)).endswith(
        "Can't downgrade the version of this feature without setting the upgrade type to "
        "either safe or unsafe downgrade.")
    assert refused({MV: 14}, (TV, 1, SAFE)).endswith("Can't downgrade to a newer version.")
    assert refused({MV: 14}, (TV, -1, SAFE)).endswith("A feature version cannot be less than 0.")
    assert refused({MV: 14}, (TV, 1, 0)).endswith(
        "The controller does not support the given upgrade type.")


def test_every_registered_broker_must_support_the_level():
    old = (2, {MV: (1, 14)})  # a broker that knows nothing of transaction.version
    assert refused({MV: 14}, (TV, 1, U), brokers=[old]) == (
        "Invalid update version 1 for feature transaction.version. Broker 2 does not support "
        "this feature.")
    assert plan({MV: 14}, (TV, 0, SAFE), brokers=[old]) == [(TV, 0)]
    assert refused({MV: 14}, (TV, 3, U)) == (
        "Invalid update version 3 for feature transaction.version. Local controller 1 only "
        "supports versions 0-2")
    assert refused({MV: 14}, (ft.GROUP_VERSION, 1, U)).endswith(
        "Local controller 1 does not support this feature.")
    assert refused({MV: 14}, ("x.version", 0, SAFE)).endswith("Feature x.version not found.")


def test_metadata_version_rules_of_kafka():
    # checked directly: Spool supports one level, so plan_update never gets this far
    with pytest.raises(KafkaError, match="less than 3.3-IV0"):
        ft._check_metadata_version(14, 3, SAFE)
    with pytest.raises(KafkaError, match="might delete metadata information"):
        ft._check_metadata_version(14, 13, SAFE)  # 3.6-IV2 changed the metadata
    with pytest.raises(KafkaError, match="Unsafe metadata downgrade is not supported"):
        ft._check_metadata_version(14, 13, UNSAFE)
    ft._check_metadata_version(10, 9, SAFE)  # 3.5-IV1 changed nothing: allowed
    with pytest.raises(KafkaError, match="Unknown metadata.version"):
        ft._check_metadata_version(14, 99, U)


def test_metadata_version_names():
    assert ft.metadata_version_name(14) == "3.6-IV2"
    assert ft.parse_metadata_version("3.6") == 14
    assert ft.parse_metadata_version("3.6-IV0") == 12
    assert ft.parse_metadata_version("21") == 21
    with pytest.raises(ValueError):
        ft.parse_metadata_version("9.9")


class _View:
    def __init__(self, levels):
        self.levels = levels

    def finalized_features(self):
        return self.levels


def test_finalized_level_is_zero_when_absent():
    assert ft.transaction_version(_View({MV: 14})) == 0
    assert ft.transaction_version(_View({MV: 14, TV: 2})) == 2
