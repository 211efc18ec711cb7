"""SecurityImage: replay of the five security records, immutability, generation, snapshot
records and the single node's JSON form."""

from __future__ import annotations

from uuid import UUID

import pytest

from spool.protocol._generated.access_control_entry_record import AccessControlEntryRecord
from spool.protocol._generated.client_quota_record import ClientQuotaRecord, EntityData
from spool.protocol._generated.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from spool.protocol._generated.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from spool.protocol._generated.topic_record import TopicRecord
from spool.protocol._generated.user_scram_credential_record import UserScramCredentialRecord
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.metadata_records import decode_record, encode_record
from spool.security.acls import AclBinding, AclPermissionType, PatternType
from spool.security.image import SecurityImage, SecurityReplayError, from_json, to_json
from spool.security.scram import ScramCredential, ScramMechanism

ID1, ID2 = UUID(int=1), UUID(int=2)
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def acl(acl_id=ID1, name="orders", principal="User:alice", op=AclOperation.READ):
    return AccessControlEntryRecord(id=acl_id, resource_type=2, resource_name=name,
                                    pattern_type=3, principal=principal, host="*",
                                    operation=int(op), permission_type=3)


def cred(name="alice", mech=1, iterations=4096):
    return UserScramCredentialRecord(name=name, mechanism=mech, salt=b"salt",
                                     stored_key=b"sk", server_key=b"svk", iterations=iterations)


def quota(key="producer_byte_rate", value=1024.0, remove=False, **entity):
    return ClientQuotaRecord(
        entity=[EntityData(entity_type=t.replace("_", "-"), entity_name=n)
                for t, n in entity.items()], key=key, value=value, remove=remove)


def test_acl_records_add_and_remove():
    img = SecurityImage().replay([acl(ID1), acl(ID2, name="payments")])
    assert img.acls == {
        ID1: AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                        AclOperation.READ, AclPermissionType.ALLOW),
        ID2: AclBinding(ResourceType.TOPIC, "payments", PatternType.LITERAL, "User:alice", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)}
    after = img.replay([RemoveAccessControlEntryRecord(id=ID1)])
    assert list(after.acls) == [ID2]
    assert list(img.acls) == [ID1, ID2]  # the old image is untouched


def test_scram_records_set_replace_remove():
    img = SecurityImage().replay([cred(), cred(mech=2), cred(iterations=8192)])
    assert img.scram == {("alice", SHA256): ScramCredential(b"salt", b"sk", b"svk", 8192),
                         ("alice", SHA512): ScramCredential(b"salt", b"sk", b"svk", 4096)}
    img = img.replay([RemoveUserScramCredentialRecord(name="alice", mechanism=1)])
    assert list(img.scram) == [("alice", SHA512)]


def test_quota_records_keyed_by_sorted_entity_with_defaults():
    img = SecurityImage().replay([
        quota(user="alice", client_id=None),
        quota(key="consumer_byte_rate", value=2048.0, client_id=None, user="alice"),
        quota(user=None, value=10.0)])
    assert img.quotas == {
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0,
                                                   "consumer_byte_rate": 2048.0},
        (("user", None),): {"producer_byte_rate": 10.0}}
    img = img.replay([quota(user=None, remove=True)])
    assert (("user", None),) not in img.quotas  # no values left: the entity is gone


def test_generation_bumps_once_per_changing_replay_and_is_not_compared():
    img = SecurityImage()
    one = img.replay([acl(ID1), cred()])
    assert one.generation == 1
    assert one.replay([TopicRecord(name="t")]) is one  # nothing of ours: same image
    two = one.replay([RemoveAccessControlEntryRecord(id=ID1), acl(ID1)])
    assert two.generation == 2 and two == one and two is not one


@pytest.mark.parametrize("rec", [RemoveAccessControlEntryRecord(id=ID2),
                                 RemoveUserScramCredentialRecord(name="bob", mechanism=1),
                                 cred(mech=3)])
def test_a_corrupt_log_is_refused(rec):
    with pytest.raises(SecurityReplayError):
        SecurityImage().replay([acl(ID1), cred(), rec])


def test_records_rebuild_an_equal_image_through_the_wire_form():
    img = SecurityImage().replay([
        acl(ID2, name="b"), acl(ID1), cred(), cred(name="bob", mech=2),
        quota(user="alice"), quota(client_id=None, key="request_percentage", value=50.0)])
    recs = [decode_record(encode_record(r))[0] for r in img.records()]
    assert SecurityImage().replay(recs) == img


def test_json_form_round_trips_every_record_type():
    recs = [acl(ID1), RemoveAccessControlEntryRecord(id=ID1), cred(name="alice"),
            RemoveUserScramCredentialRecord(name="alice", mechanism=2),
            quota(user="alice", client_id=None, remove=True)]
    for rec in recs:
        back = from_json(to_json(rec))
        assert type(back) is type(rec) and back == rec
    assert to_json(recs[2])["salt"] == "c2FsdA=="


def test_the_single_node_store_keeps_what_is_in_force_across_a_restart(tmp_path):
    from spool.storage.log import PartitionLog
    from spool.storage.manager import METADATA_LOG_CONFIG
    from spool.storage.metadata import MetadataStore
    from spool.util.clock import FakeClock

    def open_store():
        return MetadataStore(PartitionLog(tmp_path / "__cluster_metadata-0",
                                          METADATA_LOG_CONFIG, clock=FakeClock()))

    changes = [[acl(ID1), acl(ID2, name="b"), cred(), quota(user="alice")],
               [RemoveAccessControlEntryRecord(id=ID1), cred(mech=2),
                quota(user="alice", remove=True), quota(user=None, value=5.0)],
               [RemoveUserScramCredentialRecord(name="alice", mechanism=1)]]
    store = open_store()
    expected = SecurityImage()
    for recs in changes:
        store.append_security([to_json(r) for r in recs])
        expected = expected.replay(recs)
    store.log.close()
    again = open_store()
    kept = [from_json(r) for r in again.security_records()]
    assert [type(r).__name__ for r in kept] == [
        "AccessControlEntryRecord", "UserScramCredentialRecord", "ClientQuotaRecord"]
    assert SecurityImage().replay(kept) == expected
    assert list(expected.acls) == [ID2] and list(expected.scram) == [("alice", SHA512)]
    again.log.close()


def test_the_cluster_image_carries_security_and_its_snapshot_keeps_it():
    from spool.cluster.image import MetadataImage, MetadataReplayError
    from spool.cluster.snapshot import snapshot_records

    img = MetadataImage(cluster_id="c").replay([acl(ID1), cred(), quota(client_id="app")])
    assert list(img.security.acls) == [ID1] and img.security.generation == 1
    assert img.replay([TopicRecord(name="t", topic_id=ID2)]).security is img.security
    assert MetadataImage(cluster_id="c").replay(snapshot_records(img)) == img
    with pytest.raises(MetadataReplayError):
        img.replay([RemoveAccessControlEntryRecord(id=ID2)])
