"""DescribeAcls / DeleteAcls filters (spool.security.acl_ops) match an ACL's host exactly,
as Kafka's AccessControlEntryFilter: a filter for host 10.0.0.2 finds and deletes the
10.0.0.2 ACL only, a filter for ``*`` the ``*`` one only (``*`` in a filter is a literal
host, not "any"), no host filter (null) every host's. Found by mutation: with the host left
out of the filter every existing test passed (none of them names a host in a filter), and
a DeleteAcls for one host's ACL would have deleted every host's."""

from __future__ import annotations

from uuid import UUID

from spool.protocol.acl import AclOperation as Op
from spool.protocol.acl import ResourceType as RT
from spool.security import acl_ops
from spool.security.acls import AclBinding
from spool.security.acls import AclPermissionType as Perm
from spool.security.acls import PatternType as PT
from spool.security.image import SecurityImage, acl_record

HOSTS = ("*", "10.0.0.2", "10.0.0.3")


def image() -> SecurityImage:
    return SecurityImage().replay(
        acl_record(UUID(int=i + 1), AclBinding(RT.TOPIC, "orders", PT.LITERAL, "User:alice",
                                               host, Op.READ, Perm.ALLOW))
        for i, host in enumerate(HOSTS))


def host_filter(host: str | None) -> acl_ops.AclFilter:
    return acl_ops.filter_of(RT.TOPIC, "orders", PT.LITERAL, "User:alice", host, Op.READ,
                             Perm.ALLOW)


def test_describe_filters_by_host_exactly():
    img = image()
    for host in HOSTS:
        assert [b.host for _, b in acl_ops.matching(img, host_filter(host))] == [host]
    assert sorted(b.host for _, b in acl_ops.matching(img, host_filter(None))) == sorted(HOSTS)
    assert acl_ops.matching(img, host_filter("10.9.9.9")) == []


def test_delete_removes_only_the_filtered_hosts_acl():
    img = image()
    records, results = acl_ops.delete_acls(img, [host_filter("10.0.0.2")])
    assert [r.id for r in records] == [UUID(int=2)]
    assert [[b.host for b in r] for r in results] == [["10.0.0.2"]]
    left = img.replay(records)
    assert sorted(b.host for b in left.acls.values()) == ["*", "10.0.0.3"]
