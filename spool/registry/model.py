"""The registry's vocabulary: ``_schemas`` records, API values, errors, and ``Registry``.

Records of ``_schemas`` are Confluent's, so its tools read our topic and ours read theirs:
keys and values are JSON. A key's ``keytype`` is SCHEMA (``subject``, ``version``,
``magic`` 1), CONFIG or MODE (``subject``, null for the global one, ``magic`` 0),
DELETE_SUBJECT (``subject``, ``magic`` 0) or NOOP (``magic`` 0). A SCHEMA value is
``{"subject", "version", "id", "schema", "schemaType" (absent for AVRO), "references"
(absent when none), "deleted"}``; a null value (tombstone) is a permanent delete of that
version. CONFIG: ``{"compatibilityLevel": ...}``, MODE: ``{"mode": ...}``, DELETE_SUBJECT:
``{"subject", "version"}`` (every version up to ``version`` soft-deleted); null values
remove the subject's config or mode.

``RegistryError`` carries Confluent's HTTP status and ``error_code``; the API layer
answers ``{"error_code": code, "message": message}`` with that status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

SCHEMAS_TOPIC = "_schemas"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = (
    "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
    "FULL", "FULL_TRANSITIVE",
)
MODES = ("READWRITE", "READONLY", "IMPORT")
DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True)
class Reference:
    name: str  # how the referring schema names it (an Avro full name, a .proto import path)
    subject: str
    version: int


@dataclass(frozen=True)
class SchemaVersion:
    """One version of one subject, as ``GET /subjects/{s}/versions/{v}`` returns it."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True)
class Compatibility:
    """A compatibility check's answer: ``is_compatible`` and, with ``verbose=true``, why not."""

    is_compatible: bool
    messages: list[str] = field(default_factory=list)


class RegistryError(Exception):
    """An answer with Confluent's status and error code."""

    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted."
                         "Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before "
                         "being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft "
                         "deleted. Set permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not "
                         "deleted first before being permanently deleted")


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                         "compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level "
                         "mode configured")


def incompatible(messages: list[str]) -> RegistryError:
    return RegistryError(409, 409, "Schema being registered is incompatible with an earlier "
                         "schema for subject; details: " + "; ".join(messages))


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid "
                         "version id. Allowed values are between [1, 2^31-1] and the "
                         "string \"latest\"")


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(422, 42203, f"Invalid compatibility level. Valid values are none, "
                         f"backward, forward, full, backward_transitive, forward_transitive, "
                         f"and full_transitive; got {level!r}")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode. Valid values are READWRITE, READONLY "
                         f"and IMPORT; got {mode!r}")


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, 42205, detail)


def reference_exists(detail: str) -> RegistryError:
    return RegistryError(422, 42206, detail)


def store_error(detail: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {detail}")


def operation_timeout(detail: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out: {detail}")


def forward_error(detail: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the primary: "
                         f"{detail}")


class InvalidSchema(ValueError):
    """A format's parser refused the text (the API answers 42201 with the message)."""


class Registry(Protocol):
    """What the HTTP layer asks of the backend (``backend.KafkaRegistry``). Reads answer
    from this instance's copy of ``_schemas``; writes go to the primary (forwarded when
    this instance is not it) and return once this instance has applied them. Every
    method raises ``RegistryError`` for the answers Confluent gives as errors."""

    async def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]: ...

    async def versions(self, subject: str, deleted: bool = False) -> list[int]: ...

    async def version(self, subject: str, version: int | str,
                      deleted: bool = False) -> SchemaVersion: ...

    async def by_id(self, schema_id: int) -> SchemaVersion: ...

    async def subject_versions_of_id(self, schema_id: int,
                                     deleted: bool = False) -> list[tuple[str, int]]: ...

    async def referenced_by(self, subject: str, version: int | str) -> list[int]: ...

    async def lookup(self, subject: str, schema: str, schema_type: str,
                     references: list[Reference], deleted: bool = False) -> SchemaVersion:
        """The subject's version whose schema is this one (canonical forms equal)."""
        ...

    async def register(self, subject: str, schema: str, schema_type: str,
                       references: list[Reference], schema_id: int | None = None,
                       version: int | None = None) -> int:
        """The schema's id: the existing one when the subject has it already, else a new
        version after the compatibility check (409) and the mode check (42205);
        ``schema_id``/``version`` only in IMPORT mode."""
        ...

    async def check(self, subject: str, version: int | str | None, schema: str,
                    schema_type: str, references: list[Reference]) -> Compatibility:
        """``version`` None: against every version the subject's level asks for."""
        ...

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]: ...

    async def delete_version(self, subject: str, version: int | str,
                             permanent: bool = False) -> int: ...

    async def get_config(self, subject: str | None,
                         default_to_global: bool = False) -> str: ...

    async def set_config(self, subject: str | None, level: str) -> str: ...

    async def delete_config(self, subject: str | None) -> str: ...

    async def get_mode(self, subject: str | None, default_to_global: bool = False) -> str: ...

    async def set_mode(self, subject: str | None, mode: str, force: bool = False) -> str: ...

    async def delete_mode(self, subject: str | None) -> str: ...
