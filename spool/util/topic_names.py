"""Kafka's rule for topic names, in Kafka's words (``org.apache.kafka.common.internals.Topic``).

Contract: :func:`illegal_topic_reason(name)` is None for a legal name, else the
sentence Kafka's InvalidTopicException carries, e.g. ``Topic name is invalid: 'a b'
contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'``.
A legal name is 1 to 249 characters of ``[a-zA-Z0-9._-]`` and neither ``.`` nor ``..``.
The broker refuses with it (INVALID_TOPIC_EXCEPTION) and the CLI checks it before it
connects, so both say the same rule.
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def illegal_topic_reason(name: str) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's sentence), or None."""
    if not name:
        why = "the empty string is not allowed"
    elif name in (".", ".."):
        why = f"'{name}' is not allowed"
    elif len(name) > MAX_NAME_LENGTH:
        why = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not _LEGAL.fullmatch(name):
        why = (f"'{name}' contains one or more characters other than ASCII alphanumerics, "
               "'.', '_' and '-'")
    else:
        return None
    return f"Topic name is invalid: {why}"
