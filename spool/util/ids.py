"""Kafka's ``Uuid`` in text form: cluster ids, directory ids, topic ids.

A Kafka ``Uuid`` is 16 bytes, written as base64url without padding: 22
characters (``MkU3OEVBNTcwNTJENDM2Qg``). ``random_uuid()`` is Kafka's
``Uuid.randomUuid``: a random (version-4) UUID, never one whose text starts
with ``-`` (it would read as a command-line option) nor a reserved one (the
all-zero ids 0, 1 and 2: ZERO_UUID, METADATA_TOPIC_ID, and the reserved
directory ids).
"""

from __future__ import annotations

import base64
import uuid


def uuid_text(value: uuid.UUID) -> str:
    """``value`` as Kafka prints a Uuid (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def random_uuid() -> str:
    while True:
        value = uuid.uuid4()
        text = uuid_text(value)
        if not text.startswith("-") and value.int > 2:
            return text
