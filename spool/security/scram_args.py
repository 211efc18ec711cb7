"""``--add-scram`` arguments of ``spool storage format``, as Kafka's ``kafka-storage`` reads
them (its ``ScramParser``)::

    SCRAM-SHA-256=[name=admin,password=admin-secret]
    SCRAM-SHA-512=[name=alice,iterations=8192,salt=<base64>,saltedpassword=<base64>]

The mechanism, ``=``, then ``[...]`` with comma-separated ``key=value`` components
(a value in double quotes loses them): ``name`` (required), ``password`` or
``saltedpassword`` (one required; ``saltedpassword`` needs ``salt``), ``salt``
(base64; default a fresh random one), ``iterations`` (default 4096, within the
mechanism's [4096, 16384]). Anything else: ``AddScramError`` with Kafka's message.
Each argument gives one UserScramCredentialRecord, which the format step puts in the
metadata the node starts from.
"""

from __future__ import annotations

import base64
import binascii

from spool.protocol._generated.user_scram_credential_record import UserScramCredentialRecord
from spool.security.scram import ScramMechanism, credential, random_salt, salted_password

DEFAULT_ITERATIONS = 4096


class AddScramError(ValueError):
    """A malformed ``--add-scram`` argument (Kafka's FormatterException message)."""


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise AddScramError(f"Failed to decode given {what}: {text}") from e


def _components(config: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in config.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise AddScramError(f"No equals sign found in SCRAM component: {part}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        out[key] = value
    return out


def parse_add_scram(argument: str) -> UserScramCredentialRecord:
    """One ``--add-scram`` argument as the credential record it stands for."""
    text = argument.strip()
    mech_name, sep, config = text.partition("=")
    if not sep:
        raise AddScramError(f"Failed to find equals sign in SCRAM argument '{text}'")
    mech = ScramMechanism.from_name(mech_name)
    if mech is None:
        raise AddScramError(f"The add-scram mechanism {mech_name} is not supported.")
    if not config.startswith("["):
        raise AddScramError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise AddScramError("Expected configuration string to end with ]")
    parts = _components(config[1:-1])
    name = parts.pop("name", None)
    if name is None:
        raise AddScramError("You must supply 'name' to add-scram")
    salt_text = parts.pop("salt", None)
    salt = None if salt_text is None else _b64(salt_text, "salt")
    iterations_text = parts.pop("iterations", None)
    try:
        iterations = DEFAULT_ITERATIONS if iterations_text is None else int(iterations_text)
    except ValueError as e:
        raise AddScramError(f"Failed to parse iterations count: {iterations_text}") from e
    password = parts.pop("password", None)
    salted_text = parts.pop("saltedpassword", None)
    if password is None:
        if salted_text is None:
            raise AddScramError("You must supply one of 'password' or 'saltedpassword' "
                                "to add-scram")
        if salt is None:
            raise AddScramError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if parts:
        raise AddScramError(f"Unknown SCRAM configurations: {', '.join(sorted(parts))}")
    if iterations < mech.min_iterations:
        raise AddScramError(f"The 'iterations' value must be >= {mech.min_iterations} for "
                            f"add-scram using {mech.mechanism_name}")
    if iterations > mech.max_iterations:
        raise AddScramError(f"The 'iterations' value must be <= {mech.max_iterations} for "
                            f"add-scram using {mech.mechanism_name}")
    salt = random_salt() if salt is None else salt
    salted = (_b64(salted_text, "saltedPassword") if password is None
              else salted_password(mech, password, salt, iterations))
    c = credential(mech, salt, salted, iterations)
    return UserScramCredentialRecord(name=name, mechanism=int(mech), salt=c.salt,
                                     stored_key=c.stored_key, server_key=c.server_key,
                                     iterations=iterations)
