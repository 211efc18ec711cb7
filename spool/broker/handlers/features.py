"""UpdateFeatures (57) v0-2: change finalized feature levels (``spool.cluster.features``).

Where the levels live decides who writes them:

- a cluster broker forwards the request to the active controller
  (``spool.broker.forwarding``), as Kafka's brokers do;
- the active controller (controller listener) checks the updates against its own and
  every registered broker's supported levels and commits one FeatureLevelRecord per
  update through Raft (``QuorumController.update_features``); NOT_CONTROLLER elsewhere;
- a single node checks against its own table and writes its metadata store.

v0's ``allow_downgrade`` means SAFE_DOWNGRADE (else UPGRADE); v1+ carry ``upgrade_type``
and ``validate_only``. The answer is Kafka's: one failing update fails all, with the
top-level INVALID_UPDATE_VERSION and "The update failed for all features since the
following feature had an error: ..." and no per-feature results; on success v0-1 list
every feature with error 0, v2 lists none.

Authorization (Kafka's ControllerApis): ALTER on the cluster, else the top-level
CLUSTER_AUTHORIZATION_FAILED and no per-feature results. A cluster broker checks before it
forwards: Spool forwards without Kafka's Envelope, so this check is the one that counts;
the controller's handler checks its caller unless it may CLUSTER_ACTION (a broker that
forwarded: ``spool.broker.admin_authz``).
"""

from __future__ import annotations

from spool.broker.admin_authz import check_cluster, trusted_forwarder
from spool.broker.forwarding import forward
from spool.broker.registry import CONTROLLER_PLANE, handles
from spool.cluster import features
from spool.cluster.ops import ControllerResult
from spool.protocol._generated import UpdateFeaturesRequest, UpdateFeaturesResponse
from spool.protocol._generated.update_features_response import UpdatableFeatureResult
from spool.protocol.acl import AclOperation
from spool.protocol.errors import Errors, KafkaError

FAILED_ALL = "The update failed for all features since the following feature had an error: "


def updates_of(req: UpdateFeaturesRequest, version: int) -> list[features.FeatureUpdate]:
    """The request's updates, upgrade types as Kafka's ``UpdateFeaturesRequest.getFeature``."""
    out = []
    for u in req.feature_updates:
        if version == 0:
            kind = features.SAFE_DOWNGRADE if u.allow_downgrade else features.UPGRADE
        else:
            kind = u.upgrade_type
        out.append(features.FeatureUpdate(u.feature, u.max_version_level, kind))
    return out


def response(req: UpdateFeaturesRequest, version: int,
             error: KafkaError | None = None) -> UpdateFeaturesResponse:
    """The answer (module doc): ``error`` fails every update."""
    if error is not None:
        message = (FAILED_ALL + error.message if error.code == Errors.INVALID_UPDATE_VERSION
                   else error.message)
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=error.code,
                                      error_message=message, results=[])
    results = [UpdatableFeatureResult(feature=u.feature, error_code=0, error_message=None)
               for u in req.feature_updates] if version <= 1 else []
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                  results=results)


def _validate_only(req: UpdateFeaturesRequest, version: int) -> bool:
    return version >= 1 and bool(req.validate_only)


@handles(57, 0, 2)
async def update_features(ctx, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    broker, version = ctx.broker, ctx.api_version
    try:
        check_cluster(ctx, AclOperation.ALTER)
    except KafkaError as e:
        return response(req, version, e)
    if broker.view.clustered:
        return await forward(ctx, req)
    updates = updates_of(req, version)

    def plan(current: dict[str, int]) -> list[tuple[str, int]]:
        return features.plan_update(current, updates, node_id=broker.node_id)

    try:
        await broker.run_blocking(broker.metadata.update_features, plan,
                                  validate_only=_validate_only(req, version))
    except KafkaError as e:
        return response(req, version, e)
    return response(req, version)


@handles(57, 0, 2, listeners=(CONTROLLER_PLANE,))
async def update_features_on_controller(ctx, req: UpdateFeaturesRequest
                                        ) -> UpdateFeaturesResponse:
    version = ctx.api_version
    if not trusted_forwarder(ctx):
        try:
            check_cluster(ctx, AclOperation.ALTER)
        except KafkaError as e:
            return response(req, version, e)
    quorum = getattr(ctx.broker, "quorum", None)
    runtime = None if quorum is None else quorum.controller
    if runtime is None:
        return response(req, version, KafkaError(Errors.NOT_CONTROLLER,
                                                 "this node runs no controller"))
    updates = updates_of(req, version)

    def op(c, _offset, _now) -> ControllerResult[UpdateFeaturesResponse]:
        try:
            result = c.update_features(updates, node_id=runtime.node_id,
                                       validate_only=_validate_only(req, version))
        except KafkaError as e:
            return ControllerResult([], response(req, version, e))
        return ControllerResult(result.records, response(req, version))

    try:
        return await runtime.write(op)
    except KafkaError as e:
        return response(req, version, e)
