"""SecurityImage against a plain-dict model, over Hypothesis-drawn histories of the five
security records (only removals of what exists, as a controller writes them):

- the image after each step equals the model (ACLs by id, credentials by (user,
  mechanism), quota values by entity, an entity gone with its last value);
- the generation counts the replays that carried security records (an empty one returns
  the same image);
- ``records()`` replayed on an empty image gives an equal image (snapshots);
- the single node's store (``spool.storage.metadata.MetadataImage``, fed the JSON form)
  keeps records that replay to the same image (what a restart reads).
"""

from __future__ import annotations

from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.protocol._generated.access_control_entry_record import AccessControlEntryRecord
from spool.protocol._generated.client_quota_record import ClientQuotaRecord, EntityData
from spool.protocol._generated.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from spool.protocol._generated.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from spool.protocol._generated.user_scram_credential_record import UserScramCredentialRecord
from spool.security.image import SecurityImage, from_json, quota_entity, to_json
from spool.storage.metadata import MetadataImage as StoreImage

USERS = ["alice", "bob", "carol"]
ENTITIES = [(("user", "alice"),), (("user", None),), (("client-id", "app"), ("user", "bob")),
            (("client-id", None),)]
KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]


@st.composite
def histories(draw):
    """A list of steps, each a list of records valid against the state before it."""
    acls: dict[UUID, tuple] = {}
    creds: set[tuple[str, int]] = set()
    quotas: dict[tuple, set[str]] = {}
    next_id = 1
    steps = []
    for _ in range(draw(st.integers(1, 12))):
        step = []
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["acl", "unacl", "cred", "uncred", "quota", "unquota"]))
            if kind == "acl":
                acl_id = UUID(int=next_id)
                next_id += 1
                acls[acl_id] = ()
                step.append(AccessControlEntryRecord(
                    id=acl_id, resource_type=draw(st.sampled_from([2, 3, 4])),
                    resource_name=draw(st.sampled_from(["t", "g", "kafka-cluster", "*"])),
                    pattern_type=draw(st.sampled_from([3, 4])),
                    principal=f"User:{draw(st.sampled_from(USERS))}", host="*",
                    operation=draw(st.integers(2, 12)), permission_type=draw(
                        st.sampled_from([2, 3]))))
            elif kind == "unacl" and acls:
                acl_id = draw(st.sampled_from(sorted(acls)))
                del acls[acl_id]
                step.append(RemoveAccessControlEntryRecord(id=acl_id))
            elif kind == "cred":
                key = (draw(st.sampled_from(USERS)), draw(st.sampled_from([1, 2])))
                creds.add(key)
                step.append(UserScramCredentialRecord(
                    name=key[0], mechanism=key[1], salt=draw(st.binary(max_size=4)),
                    stored_key=draw(st.binary(max_size=4)), server_key=b"k",
                    iterations=draw(st.integers(4096, 16384))))
            elif kind == "uncred" and creds:
                key = draw(st.sampled_from(sorted(creds)))
                creds.discard(key)
                step.append(RemoveUserScramCredentialRecord(name=key[0], mechanism=key[1]))
            elif kind in ("quota", "unquota"):
                entity = draw(st.sampled_from(ENTITIES))
                key = draw(st.sampled_from(KEYS))
                remove = kind == "unquota"
                (quotas.setdefault(entity, set()).discard if remove
                 else quotas.setdefault(entity, set()).add)(key)
                pairs = list(entity)
                if draw(st.booleans()):
                    pairs.reverse()  # a record may list an entity in any order
                step.append(ClientQuotaRecord(
                    entity=[EntityData(entity_type=t, entity_name=n) for t, n in pairs],
                    key=key, value=float(draw(st.integers(1, 10**6))), remove=remove))
        steps.append(step)
    return steps


def model_apply(model: dict, rec) -> None:
    if isinstance(rec, AccessControlEntryRecord):
        model["acls"][rec.id] = (rec.resource_type, rec.resource_name, rec.pattern_type,
                                 rec.principal, rec.host, rec.operation, rec.permission_type)
    elif isinstance(rec, RemoveAccessControlEntryRecord):
        del model["acls"][rec.id]
    elif isinstance(rec, UserScramCredentialRecord):
        model["scram"][(rec.name, rec.mechanism)] = (rec.salt, rec.stored_key, rec.server_key,
                                                     rec.iterations)
    elif isinstance(rec, RemoveUserScramCredentialRecord):
        del model["scram"][(rec.name, rec.mechanism)]
    else:
        entity = quota_entity((e.entity_type, e.entity_name) for e in rec.entity)
        values = model["quotas"].setdefault(entity, {})
        if rec.remove:
            values.pop(rec.key, None)
        else:
            values[rec.key] = rec.value
        if not values:
            del model["quotas"][entity]


def as_model(image: SecurityImage) -> dict:
    return {
        "acls": {i: (int(b.resource_type), b.resource_name, int(b.pattern_type), b.principal,
                     b.host, int(b.operation), int(b.permission_type))
                 for i, b in image.acls.items()},
        "scram": {(u, int(m)): tuple(c) for (u, m), c in image.scram.items()},
        "quotas": {e: dict(v) for e, v in image.quotas.items()},
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_security_image_follows_the_model(steps):
    image = SecurityImage()
    model: dict = {"acls": {}, "scram": {}, "quotas": {}}
    store = StoreImage()
    changes = 0
    for step in steps:
        before = image
        image = image.replay(step)
        for rec in step:
            model_apply(model, rec)
            store.apply(to_json(rec))
        changes += bool(step)
        assert (image is before) == (not step)
        assert as_model(image) == model
        assert image.generation == changes
    assert SecurityImage().replay(image.records()) == image
    kept = [from_json(r) for r in store.security.values()]
    assert SecurityImage().replay(kept) == image
