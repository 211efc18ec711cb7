"""AlterUserScramCredentials and DescribeUserScramCredentials from a ``SecurityImage``.

Kafka's rules (``ScramControlManager.alterCredentials``, ``ScramImage.describe``):

- A user named twice in one AlterUserScramCredentials request (deletions and
  upsertions together) gets DUPLICATE_RESOURCE "A user credential cannot be altered
  twice in the same request", and none of its changes happen.
- An empty user name: UNACCEPTABLE_CREDENTIAL "Username must not be empty"; a mechanism
  other than SCRAM-SHA-256 (1) / SCRAM-SHA-512 (2): UNSUPPORTED_SASL_MECHANISM
  "Unknown SCRAM mechanism"; iterations below the mechanism's minimum (4096) or above
  16384: UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many iterations";
  deleting a credential that does not exist: RESOURCE_NOT_FOUND "Attempt to delete a
  user credential that does not exist".
- An upsertion stores the salt, the iterations and the keys derived from the client's
  salted password (``scram.credential``): UserScramCredentialRecord; a deletion,
  RemoveUserScramCredentialRecord. Results: deletions, then upsertions, then errors,
  one per user.
- Describe: no users (null or empty) lists every user with a credential; a user asked
  for twice gets DUPLICATE_RESOURCE "Cannot describe SCRAM credentials for the same
  user twice in a single request: <user>", one without credentials RESOURCE_NOT_FOUND
  "Attempt to describe a user credential that does not exist: <user>"; else its
  (mechanism, iterations) pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from spool.protocol._generated.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from spool.protocol._generated.user_scram_credential_record import UserScramCredentialRecord
from spool.protocol.errors import Errors, KafkaError
from spool.security.image import SecurityImage
from spool.security.scram import ScramMechanism, credential

TWICE = "A user credential cannot be altered twice in the same request"
DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "


class Upsertion(NamedTuple):
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class Deletion(NamedTuple):
    name: str
    mechanism: int


def _mechanism(name: str, mechanism: int) -> ScramMechanism | KafkaError:
    if not name:
        return KafkaError(Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    try:
        return ScramMechanism(mechanism)
    except ValueError:
        return KafkaError(Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")


def alter_credentials(image: SecurityImage, deletions: Sequence[Deletion],
                      upsertions: Sequence[Upsertion]
                      ) -> tuple[list[Any], list[tuple[str, KafkaError | None]]]:
    """(records, (user, None or its error) per user) as the module doc says."""
    errors: dict[str, KafkaError] = {}
    deletes: dict[str, Deletion] = {}
    upserts: dict[str, Upsertion] = {}
    for d in deletions:
        if d.name in errors:
            continue
        if deletes.pop(d.name, None) is not None:
            errors[d.name] = KafkaError(Errors.DUPLICATE_RESOURCE, TWICE)
            continue
        mech = _mechanism(d.name, d.mechanism)
        if isinstance(mech, KafkaError):
            errors[d.name] = mech
        elif (d.name, mech) not in image.scram:
            errors[d.name] = KafkaError(Errors.RESOURCE_NOT_FOUND,
                                        "Attempt to delete a user credential that does not exist")
        else:
            deletes[d.name] = d
    for u in upsertions:
        if u.name in errors:
            continue
        if deletes.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = KafkaError(Errors.DUPLICATE_RESOURCE, TWICE)
            continue
        mech = _mechanism(u.name, u.mechanism)
        if isinstance(mech, KafkaError):
            errors[u.name] = mech
        elif u.iterations < mech.min_iterations:
            errors[u.name] = KafkaError(Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > mech.max_iterations:
            errors[u.name] = KafkaError(Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        else:
            upserts[u.name] = u
    records: list[Any] = []
    results: list[tuple[str, KafkaError | None]] = []
    for d in deletes.values():
        records.append(RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism))
        results.append((d.name, None))
    for u in upserts.values():
        c = credential(ScramMechanism(u.mechanism), bytes(u.salt), bytes(u.salted_password),
                       u.iterations)
        records.append(UserScramCredentialRecord(
            name=u.name, mechanism=u.mechanism, salt=c.salt, stored_key=c.stored_key,
            server_key=c.server_key, iterations=c.iterations))
        results.append((u.name, None))
    results += list(errors.items())
    return records, results


class Described(NamedTuple):
    user: str
    error: KafkaError | None
    credentials: list[tuple[int, int]]  # (mechanism, iterations)


def describe_credentials(image: SecurityImage, users: Sequence[str] | None) -> list[Described]:
    """One answer per distinct user (module doc); every user when ``users`` is empty."""
    counts: dict[str, int] = {}
    if not users:
        for name, _ in sorted(image.scram):
            counts[name] = 1
    else:
        for name in users:
            counts[name] = counts.get(name, 0) + 1
    out = []
    for name, n in counts.items():
        if n > 1:
            out.append(Described(name, KafkaError(Errors.DUPLICATE_RESOURCE,
                                                  DESCRIBE_TWICE + name), []))
            continue
        creds = [(int(m), image.scram[(name, m)].iterations) for m in ScramMechanism
                 if (name, m) in image.scram]
        if creds:
            out.append(Described(name, None, creds))
        else:
            out.append(Described(name, KafkaError(Errors.RESOURCE_NOT_FOUND,
                                                  DESCRIBE_MISSING + name), []))
    return out
