"""Per-subject permissions for authenticated users, named as Kafka's ACLs name theirs.

``spool registry --authentication basic --permissions FILE``: each line of FILE (``#``
comments and blank lines skipped) is one rule ``PRINCIPAL OPERATION SUBJECT``:

  PRINCIPAL  ``User:NAME`` (a cluster user), or ``User:*`` (every authenticated user)
  OPERATION  ``READ`` (read a subject's versions, config and mode; look a schema up in
             it; check compatibility against it), ``WRITE`` (register, delete, set or
             remove the subject's config and mode; implies READ) or ``ALL``
  SUBJECT    a subject name (Kafka's LITERAL pattern), a prefix ending in ``*``
             (PREFIXED: ``orders-*``), or ``*`` (every subject, and the global config
             and mode)

Rules only allow (no DENY); whatever no rule allows is refused with 403 and
error_code 40301, ``User is denied operation Write on Subject: orders-value``. Without
``--permissions`` an authenticated user may do anything. Changing the global config or
mode needs WRITE on ``*``; reading them, ``/``, ``/schemas/types`` and ``/contexts`` need
nothing more than authentication. Lists (``GET /subjects``, ``GET /schemas``,
``/schemas/ids/{id}/versions`` and ``/subjects``) leave out what the user may not READ,
and a schema by id is readable when one of the subjects using it is (else 403).
A reference to another subject is not checked (it reveals only that schema's existence).

``Permissions.parse(text)`` raises ``ValueError`` naming the line; ``allows(user, op,
subject)`` (subject None: the global config and mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spool.registry import model

OPERATIONS = ("READ", "WRITE", "ALL")


@dataclass(frozen=True)
class Rule:
    user: str  # "*": anyone
    operation: str
    pattern: str  # "*", "prefix*" or a literal name

    def matches(self, user: str, operation: str, subject: str | None) -> bool:
        if self.user not in ("*", user):
            return False
        if not (self.operation in ("ALL", operation)
                or (self.operation == "WRITE" and operation == "READ")):
            return False
        if self.pattern == "*":
            return True
        if subject is None:
            return False
        if self.pattern.endswith("*"):
            return subject.startswith(self.pattern[:-1])
        return subject == self.pattern


class Permissions:
    """The rules of a ``--permissions`` file (module doc)."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules

    @classmethod
    def parse(cls, text: str, where: str = "permissions") -> Permissions:
        rules = []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3:
                raise ValueError(f"{where}:{n}: expected PRINCIPAL OPERATION SUBJECT, got "
                                 f"{line!r}")
            principal, operation, pattern = parts
            kind, _, user = principal.partition(":")
            if kind != "User" or not user:
                raise ValueError(f"{where}:{n}: the principal must be User:NAME or User:*, "
                                 f"got {principal!r}")
            if operation.upper() not in OPERATIONS:
                raise ValueError(f"{where}:{n}: the operation must be one of "
                                 f"{', '.join(OPERATIONS)}, got {operation!r}")
            if "*" in pattern[:-1]:
                raise ValueError(f"{where}:{n}: '*' may only end the subject pattern, got "
                                 f"{pattern!r}")
            rules.append(Rule(user, operation.upper(), pattern))
        return cls(rules)

    @classmethod
    def load(cls, path: str | Path) -> Permissions:
        return cls.parse(Path(path).read_text(encoding="utf-8"), str(path))

    def allows(self, user: str, operation: str, subject: str | None) -> bool:
        return any(r.matches(user, operation, subject) for r in self.rules)

    def check(self, user: str, operation: str, subject: str | None) -> None:
        """``denied`` (403/40301) unless a rule allows it."""
        if not self.allows(user, operation, subject):
            raise denied(operation, subject)


def denied(operation: str, subject: str | None) -> model.RegistryError:
    what = f"Subject: {subject}" if subject is not None else "the global config and mode"
    return model.RegistryError(403, 40301, f"User is denied operation "
                               f"{operation.capitalize()} on {what}")
