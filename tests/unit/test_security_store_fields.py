"""The single node's metadata store keeps every field of every security record across a
restart, not only the values the other tests happen to use (host ``*``, 4096 iterations):
a host-specific DENY of a PREFIXED group ACL, a SCRAM-SHA-512 credential salted with 8192
iterations, a user+client-id quota. Found by mutation: with ``from_json`` reading back a
credential's iterations as 4096, or an ACL's host as ``*``, every existing test passed
(a restart would have locked the user out, or widened a host-specific ACL to every host)."""

from __future__ import annotations

from uuid import UUID

from spool.protocol._generated.access_control_entry_record import AccessControlEntryRecord
from spool.protocol._generated.client_quota_record import ClientQuotaRecord, EntityData
from spool.protocol._generated.user_scram_credential_record import UserScramCredentialRecord
from spool.protocol.acl import AclOperation, ResourceType
from spool.security.acls import AclPermissionType, PatternType
from spool.security.image import SecurityImage, from_json, to_json
from spool.security.scram import ScramMechanism, credential_from_password
from spool.storage.log import PartitionLog
from spool.storage.manager import METADATA_LOG_CONFIG
from spool.storage.metadata import MetadataStore
from spool.util.clock import FakeClock

SHA512 = ScramMechanism.SCRAM_SHA_512
CRED = credential_from_password(SHA512, "secret", iterations=8192)


def records() -> list:
    c = CRED
    return [
        AccessControlEntryRecord(
            id=UUID(int=7), resource_type=int(ResourceType.GROUP), resource_name="app-",
            pattern_type=int(PatternType.PREFIXED), principal="User:mallory", host="10.0.0.2",
            operation=int(AclOperation.DELETE), permission_type=int(AclPermissionType.DENY)),
        UserScramCredentialRecord(name="carol", mechanism=int(SHA512), salt=c.salt,
                                  stored_key=c.stored_key, server_key=c.server_key,
                                  iterations=8192),
        ClientQuotaRecord(entity=[EntityData(entity_type="client-id", entity_name="app"),
                                  EntityData(entity_type="user", entity_name="carol")],
                          key="producer_byte_rate", value=1234.5, remove=False),
    ]


def test_the_json_form_keeps_every_field():
    for rec in records():
        assert from_json(to_json(rec)) == rec


def test_every_field_survives_a_restart_of_the_store(tmp_path):
    def open_store():
        return MetadataStore(PartitionLog(tmp_path / "__cluster_metadata-0",
                                          METADATA_LOG_CONFIG, clock=FakeClock()))

    store = open_store()
    store.append_security([to_json(r) for r in records()])
    store.log.close()
    again = open_store()
    try:
        kept = [from_json(r) for r in again.security_records()]
    finally:
        again.log.close()
    assert kept == records()
    image = SecurityImage().replay(kept)
    (binding,) = image.acls.values()
    assert (binding.host, binding.pattern_type, binding.permission_type) == (
        "10.0.0.2", PatternType.PREFIXED, AclPermissionType.DENY)
    assert image.scram[("carol", SHA512)].iterations == 8192
    assert image.quotas[(("client-id", "app"), ("user", "carol"))] == {
        "producer_byte_rate": 1234.5}
