"""The controller plane's own check of AlterConfigs / IncrementalAlterConfigs
(``admin_authz.config_refusals``, for a client on a controller listener: a broker that
forwards is trusted with CLUSTER_ACTION and checked before forwarding): each resource is
refused with its ACL resource's error unless the principal may ALTER_CONFIGS it, with the
real StandardAuthorizer. Found by mutation: with the check taken out of config_refusals
every existing test passed, tests/cluster/test_acl_admin_cluster included (it sends no
config change to a controller listener)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from spool.broker import admin_authz
from spool.protocol._generated.alter_configs_request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from spool.protocol._generated.alter_configs_response import AlterConfigsResourceResponse
from spool.protocol.acl import AclOperation as Op
from spool.protocol.acl import ResourceType as Rt
from spool.protocol.errors import Errors
from spool.security.acls import AclBinding, AclPermissionType, PatternType
from spool.security.authorizer import StandardAuthorizer
from spool.security.image import SecurityImage, acl_record

TOPIC, BROKER, GROUP = 2, 4, 32  # ConfigResource types


def ctx(*grants: tuple):
    bindings = [AclBinding(rtype, name, PatternType.LITERAL, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for rtype, name, op in grants]
    image = SecurityImage().replay(acl_record(uuid.uuid4(), b) for b in bindings)
    return SimpleNamespace(broker=SimpleNamespace(authorizer=StandardAuthorizer(),
                                                  security_image=image),
                           conn=SimpleNamespace(principal="User:alice", host="10.0.0.1"))


def refusals(c) -> list[int | None]:
    req = AlterConfigsRequest(validate_only=False, resources=[
        AlterConfigsResource(resource_type=t, resource_name=n, configs=[
            AlterableConfig(name="retention.ms", value="1")])
        for t, n in [(TOPIC, "orders"), (TOPIC, "other"), (BROKER, "1"), (GROUP, "g")]])
    out = admin_authz.config_refusals(c, req, Op.ALTER_CONFIGS, AlterConfigsResourceResponse)
    return [None if r is None else r.error_code for r in out]


def test_each_resource_needs_alter_configs_on_its_acl_resource():
    assert refusals(ctx()) == [Errors.TOPIC_AUTHORIZATION_FAILED,
                               Errors.TOPIC_AUTHORIZATION_FAILED,
                               Errors.CLUSTER_AUTHORIZATION_FAILED,
                               Errors.GROUP_AUTHORIZATION_FAILED]
    assert refusals(ctx((Rt.TOPIC, "orders", Op.ALTER_CONFIGS),
                        (Rt.GROUP, "g", Op.ALTER_CONFIGS))) == [
        None, Errors.TOPIC_AUTHORIZATION_FAILED, Errors.CLUSTER_AUTHORIZATION_FAILED, None]
    # DESCRIBE_CONFIGS is not enough; ALTER_CONFIGS on the cluster covers the broker
    assert refusals(ctx((Rt.TOPIC, "other", Op.DESCRIBE_CONFIGS),
                        (Rt.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS))) == [
        Errors.TOPIC_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED, None,
        Errors.GROUP_AUTHORIZATION_FAILED]
