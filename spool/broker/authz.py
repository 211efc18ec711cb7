"""The handlers' one way to ask the authorizer: ``allowed`` and ``allowed_names``.

``broker.authorizer`` is a ``spool.security.authorizer.StandardAuthorizer`` when
``authorizer.class.name`` names it, else None: no authorizer, every request allowed
(Kafka's broker without an authorizer), and each check costs one attribute test. With
one, the principal is the connection's (``ctx.principal``, as TLS or SASL set it), the
host its peer address (``ctx.conn.host``), the ACLs those of ``broker.security_image``;
a repeated check is one memoised dict lookup (see the authorizer).

Handlers on a hot path (Produce, Fetch) test ``ctx.broker.authorizer is None`` once per
request and only then ask per topic. The errors to answer, and where in the response
they go, are each handler's: Kafka's ``KafkaApis`` is the reference.
"""

from __future__ import annotations

from collections.abc import Iterable

from spool.protocol.acl import SUPPORTED_OPERATIONS, AclOperation, ResourceType, to_bitfield

CLUSTER_NAME = "kafka-cluster"  # Kafka's name of the one CLUSTER resource


def _image(broker):
    return broker.security_image


def allowed(ctx, op: AclOperation, resource_type: ResourceType, name: str,
            log_denied: bool = True) -> bool:
    """Whether the request's principal may ``op`` the LITERAL resource ``name``
    (``log_denied=False``: a probe whose refusal is no denial, as Kafka's
    ``logIfDenied = false``: nothing is logged)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(_image(ctx.broker), str(ctx.conn.principal), ctx.conn.host,
                                op, resource_type, name, log_denied)


def allowed_names(ctx, op: AclOperation, resource_type: ResourceType,
                  names: Iterable[str], log_denied: bool = True) -> set[str]:
    """The subset of ``names`` the request's principal may ``op``; ``log_denied=False``
    for a filter (the names were not asked for one by one: no denial is logged)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return set(names)
    image, principal, host = _image(ctx.broker), str(ctx.conn.principal), ctx.conn.host
    authorize = authorizer.authorize
    return {n for n in names
            if authorize(image, principal, host, op, resource_type, n, log_denied)}


def allowed_cluster(ctx, op: AclOperation, log_denied: bool = True) -> bool:
    """``op`` on the CLUSTER resource (``kafka-cluster``)."""
    return allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME, log_denied)


def allowed_by_resource_type(ctx, op: AclOperation, resource_type: ResourceType) -> bool:
    """Whether the principal may ``op`` some resource of the type (Kafka's
    ``authorizeByResourceType``: an idempotent producer's WRITE on any topic, KIP-679)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(
        _image(ctx.broker), str(ctx.conn.principal), ctx.conn.host, op, resource_type)


def authorized_operations(ctx, resource_type: ResourceType, name: str) -> int:
    """The ``*_authorized_operations`` bitfield: the operations the resource type supports
    (``SUPPORTED_OPERATIONS``) that the principal may perform on ``name``; all of them
    without an authorizer (Kafka's ``AuthHelper.authorizedOperations``)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return to_bitfield(SUPPORTED_OPERATIONS[resource_type])
    return to_bitfield(authorizer.authorized_operations(
        _image(ctx.broker), str(ctx.conn.principal), ctx.conn.host, resource_type, name))
