"""UpdateFeatures on a real 3-node cluster: a broker forwards it to the active controller,
which commits a FeatureLevelRecord through Raft; every broker then reports the new finalized
level and epoch in ApiVersions, and the level survives the active controller's kill -9 (it
is in the metadata log, not in one node's memory)."""

from __future__ import annotations

import pytest

from spool.protocol._generated import ApiVersionsRequest, UpdateFeaturesRequest
from spool.protocol._generated.update_features_request import FeatureUpdateKey
from spool.protocol.errors import Errors
from tests.helpers.raw_client import request_once

pytestmark = pytest.mark.timeout(240)


def finalized(bootstrap: str) -> tuple[dict[str, int], int] | str:
    try:
        resp = request_once(bootstrap, 18, 4, ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
    except OSError as e:
        return f"unreachable: {e}"
    return ({f.name: f.max_version_level for f in resp.finalized_features},
            resp.finalized_features_epoch)


def update(bootstrap: str, name: str, level: int, kind: int = 1,
           validate_only: bool = False):
    return request_once(bootstrap, 57, 2, UpdateFeaturesRequest(
        timeout_ms=10_000, validate_only=validate_only, feature_updates=[
            FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind)]))


def test_update_features_goes_through_the_controller_to_every_broker(cluster_factory):
    cluster = cluster_factory().start()
    cluster.wait_formed()
    for n in cluster.brokers:
        levels = finalized(n.bootstrap)
        assert not isinstance(levels, str) and levels[0] == {"metadata.version": 14}

    active = cluster.active_controller()
    assert active is not None
    other = next(n for n in cluster.brokers if n.node_id != active.leader_id)
    # refused by the controller: nothing written
    resp = update(other.bootstrap, "transaction.version", 3)
    assert resp.error_code == Errors.INVALID_UPDATE_VERSION
    assert "Local controller" in resp.error_message and "only supports versions 0-2" \
        in resp.error_message
    assert update(other.bootstrap, "transaction.version", 2, validate_only=True).error_code == 0

    resp = update(other.bootstrap, "transaction.version", 2)
    assert (resp.error_code, resp.error_message) == (0, None)

    def everywhere(level: int):
        def check() -> dict | str:
            seen = {n.node_id: finalized(n.bootstrap) for n in cluster.brokers
                    if n.alive}
            if any(isinstance(s, str) or s[0].get("transaction.version") != level
                   for s in seen.values()):
                return f"not yet: {seen}"
            return seen
        return check

    seen = cluster.wait_until("every broker reports transaction.version 2", everywhere(2))
    assert all(epoch > 0 for _, epoch in seen.values())

    cluster.nodes[active.leader_id].kill()
    cluster.wait_until("a new active controller", lambda: cluster.active_controller(
        exclude=[active.leader_id]) or "none yet")
    resp = update(other.bootstrap, "transaction.version", 1, kind=2)  # SAFE_DOWNGRADE
    assert resp.error_code == 0, resp.error_message
    cluster.wait_until("every live broker reports transaction.version 1", everywhere(1))


def test_client_metrics_resources_go_through_the_controller(cluster_factory):
    from spool.protocol._generated import (
        IncrementalAlterConfigsRequest,
        ListConfigResourcesRequest,
    )
    from spool.protocol._generated.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
    )

    cluster = cluster_factory().start()
    cluster.wait_formed()
    first, *others = cluster.brokers

    def alter(value: str):
        resp = request_once(first.bootstrap, 44, 1, IncrementalAlterConfigsRequest(
            validate_only=False, resources=[AlterConfigsResource(
                resource_type=16, resource_name="all-producers", configs=[
                    AlterableConfig(name="interval.ms", config_operation=0, value=value)])]))
        return resp.responses[0].error_code

    assert alter("50") == Errors.INVALID_REQUEST  # the controller checks it
    assert alter("1000") == 0

    def listed_everywhere() -> dict | str:
        seen = {n.node_id: [c.resource_name for c in request_once(
            n.bootstrap, 74, 0, ListConfigResourcesRequest()).config_resources]
            for n in cluster.brokers}
        if any(names != ["all-producers"] for names in seen.values()):
            return f"not yet: {seen}"
        return seen

    cluster.wait_until("every broker lists the subscription", listed_everywhere)
