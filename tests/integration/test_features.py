"""Feature flags on a real single node: ApiVersions v3/v4 report the supported and finalized
levels (``spool.cluster.features``); UpdateFeatures v0-2 upgrades and downgrades them with
Kafka's rules and answers; the levels are in the metadata store, so a restart keeps them."""

from __future__ import annotations

import json
import subprocess

import pytest

from spool.protocol._generated import ApiVersionsRequest, UpdateFeaturesRequest
from spool.protocol._generated.update_features_request import FeatureUpdateKey
from spool.protocol.errors import Errors
from tests.helpers.cli import spool_cli
from tests.helpers.raw_client import request_once

pytestmark = pytest.mark.timeout(120)

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def api_features(bootstrap: str, version: int = 4):
    resp = request_once(bootstrap, 18, version, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in resp.finalized_features}
    return supported, finalized, resp.finalized_features_epoch


def update(bootstrap: str, *changes, version: int = 2, validate_only: bool = False):
    """changes: (feature, level, upgrade_type) (v0: upgrade_type is allow_downgrade)."""
    keys = []
    for name, level, kind in changes:
        if version == 0:
            keys.append(FeatureUpdateKey(feature=name, max_version_level=level,
                                         allow_downgrade=kind != UPGRADE))
        else:
            keys.append(FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind))
    return request_once(bootstrap, 57, version, UpdateFeaturesRequest(
        timeout_ms=10_000, feature_updates=keys, validate_only=validate_only))


def test_api_versions_lists_supported_and_finalized_features(broker):
    supported, finalized, epoch = api_features(broker.bootstrap, 4)
    assert supported["metadata.version"] == (14, 14)
    assert supported["transaction.version"] == (0, 2)
    assert "group.version" not in supported  # claimed at 0 only: not advertised
    assert finalized["metadata.version"] == (14, 14)
    assert epoch >= 0
    # below v4, features whose minimum is 0 are left out (KAFKA-17492)
    supported3, finalized3, _ = api_features(broker.bootstrap, 3)
    assert supported3 == {"metadata.version": (14, 14)}
    assert finalized3["metadata.version"] == (14, 14)


def test_upgrade_then_downgrade_transaction_version_survives_restart(fresh_broker):
    b = fresh_broker.start()
    _, before, epoch0 = api_features(b.bootstrap)
    assert "transaction.version" not in before  # level 0 on a new node

    resp = update(b.bootstrap, ("transaction.version", 2, UPGRADE))
    assert (resp.error_code, resp.error_message, resp.results) == (0, None, [])
    _, after, epoch1 = api_features(b.bootstrap)
    assert after["transaction.version"] == (2, 2)
    assert epoch1 > epoch0

    b.restart()
    _, restarted, _ = api_features(b.bootstrap)
    assert restarted["transaction.version"] == (2, 2)

    # a lower level needs a downgrade type
    resp = update(b.bootstrap, ("transaction.version", 1, UPGRADE))
    assert resp.error_code == Errors.INVALID_UPDATE_VERSION
    assert resp.error_message == (
        "The update failed for all features since the following feature had an error: "
        "Invalid update version 1 for feature transaction.version. Can't downgrade the "
        "version of this feature without setting the upgrade type to either safe or unsafe "
        "downgrade.")
    resp = update(b.bootstrap, ("transaction.version", 0, SAFE_DOWNGRADE))
    assert resp.error_code == 0
    _, down, _ = api_features(b.bootstrap)
    assert "transaction.version" not in down


def test_validate_only_changes_nothing(fresh_broker):
    b = fresh_broker.start()
    resp = update(b.bootstrap, ("transaction.version", 1, UPGRADE), version=1,
                  validate_only=True)
    assert resp.error_code == 0
    assert [(r.feature, r.error_code) for r in resp.results] == [("transaction.version", 0)]
    _, finalized, _ = api_features(b.bootstrap)
    assert "transaction.version" not in finalized


def test_levels_spool_does_not_claim_are_refused_whole(fresh_broker):
    b = fresh_broker.start()
    cases = {
        ("transaction.version", 3, UPGRADE):
            "Invalid update version 3 for feature transaction.version. Local controller 0 "
            "only supports versions 0-2",
        ("group.version", 1, UPGRADE):
            "Invalid update version 1 for feature group.version. Local controller 0 does not "
            "support this feature.",
        ("no.such.feature", 1, UPGRADE):
            "Invalid update version 1 for feature no.such.feature. Local controller 0 does "
            "not support this feature.",
        ("metadata.version", 15, UPGRADE):
            "Invalid update version 15 for feature metadata.version. Local controller 0 only "
            "supports versions 14-14",
        ("transaction.version", 2, SAFE_DOWNGRADE):
            "Invalid update version 2 for feature transaction.version. Can't downgrade to a "
            "newer version.",
        ("transaction.version", 1, 7):
            "Invalid update version 1 for feature transaction.version. The controller does "
            "not support the given upgrade type.",
    }
    for change, why in cases.items():
        # a valid update in the same request is not made either
        resp = update(b.bootstrap, ("transaction.version", 1, UPGRADE), change) \
            if change[0] != "transaction.version" else update(b.bootstrap, change)
        assert resp.error_code == Errors.INVALID_UPDATE_VERSION, change
        assert resp.error_message.endswith(why), (change, resp.error_message)
        assert resp.results == []
    _, finalized, _ = api_features(b.bootstrap)
    assert "transaction.version" not in finalized
    assert finalized["metadata.version"] == (14, 14)


def test_v0_allow_downgrade_and_per_feature_results(fresh_broker):
    b = fresh_broker.start()
    resp = update(b.bootstrap, ("transaction.version", 2, UPGRADE), version=0)
    assert [(r.feature, r.error_code, r.error_message) for r in resp.results] == [
        ("transaction.version", 0, None)]
    resp = update(b.bootstrap, ("transaction.version", 1, UPGRADE), version=0)
    assert resp.error_code == Errors.INVALID_UPDATE_VERSION
    resp = update(b.bootstrap, ("transaction.version", 1, SAFE_DOWNGRADE), version=0)
    assert resp.error_code == 0
    _, finalized, _ = api_features(b.bootstrap)
    assert finalized["transaction.version"] == (1, 1)
    # the same level again is accepted (Kafka writes it again)
    assert update(b.bootstrap, ("metadata.version", 14, UPGRADE)).error_code == 0


# -- spool features (kafka-features.sh's verbs) -------------------------------------------

def cli(b, *args: str) -> subprocess.CompletedProcess[str]:
    """``spool features ARGS`` in-process (``tests.helpers.cli``)."""
    return spool_cli("features", *args, "--bootstrap-server", b.bootstrap)


def describe_lines(b) -> list[str]:
    proc = cli(b, "describe")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_cli_describe_upgrade_downgrade_with_exit_codes(fresh_broker):
    b = fresh_broker.start()
    lines = describe_lines(b)
    epoch = lines[0].rsplit("Epoch: ", 1)[1]
    assert lines == [
        "Feature: metadata.version\tSupportedMinVersion: 3.6-IV2\tSupportedMaxVersion: 3.6-IV2\t"
        f"FinalizedVersionLevel: 3.6-IV2\tEpoch: {epoch}",
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t"
        f"FinalizedVersionLevel: 0\tEpoch: {epoch}",
    ]

    proc = cli(b, "upgrade", "--feature", "transaction.version=2", "--dry-run")
    assert (proc.returncode, proc.stdout) == (0, "transaction.version can be upgraded to 2.\n")
    assert "FinalizedVersionLevel: 0" in describe_lines(b)[1]

    proc = cli(b, "upgrade", "--feature", "transaction.version=2", "--metadata", "3.6")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("metadata.version was upgraded to 14.\n"
                           "transaction.version was upgraded to 2.\n")
    assert "FinalizedVersionLevel: 2" in describe_lines(b)[1]

    # one refused update fails the request: both lines say so, exit 1, one stderr line
    proc = cli(b, "upgrade", "--feature", "group.version=1", "--feature",
               "transaction.version=2")
    assert proc.returncode == 1
    out = proc.stdout.splitlines()
    assert out[0].startswith("Could not upgrade group.version to 1. The update failed for all "
                             "features since the following feature had an error: Invalid "
                             "update version 1 for feature group.version.")
    assert out[1].startswith("Could not upgrade transaction.version to 2. ")
    assert proc.stderr == "spool: 2 out of 2 operation(s) failed.\n"
    as_json = cli(b, "upgrade", "--feature", "group.version=1", "--feature",
                  "transaction.version=2", "--json")
    assert (as_json.returncode, as_json.stderr) == (
        1, "spool: 2 out of 2 operation(s) failed.\n")
    assert [(d["feature"], d["level"], d["error"]) for d in json.loads(as_json.stdout)] == [
        ("group.version", 1, "INVALID_UPDATE_VERSION"),
        ("transaction.version", 2, "INVALID_UPDATE_VERSION")]

    proc = cli(b, "downgrade", "--feature", "transaction.version=1")
    assert (proc.returncode, proc.stdout) == (0, "transaction.version was downgraded to 1.\n")
    proc = cli(b, "disable", "--feature", "transaction.version")
    assert (proc.returncode, proc.stdout) == (0, "transaction.version was disabled.\n")
    assert "FinalizedVersionLevel: 0" in describe_lines(b)[1]

    # bad usage: exit 2, one line on stderr, nothing sent
    for args, why in [
        (("upgrade",), "You must specify at least one feature to upgrade"),
        (("upgrade", "--feature", "transaction.version"), "equals sign not found"),
        (("upgrade", "--feature", "transaction.version=x"), "unable to parse x as a short"),
        (("upgrade", "--metadata", "9.9-IV9"), "Unknown metadata.version 9.9-IV9"),
        (("upgrade", "--feature", "a=1", "--feature", "a=2"), "specified more than once"),
    ]:
        proc = cli(b, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("spool: ") and why in proc.stderr
        assert len(proc.stderr.splitlines()) == 1
