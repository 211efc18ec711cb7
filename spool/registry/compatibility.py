"""Compatibility levels over a format's reader/writer check.

``check(level, new, previous, fmt)`` lists why ``new`` may not follow ``previous`` (the
subject's live versions, oldest first, parsed by ``fmt``) under ``level``; empty: it may.

  NONE                 nothing is checked
  BACKWARD             the new schema reads data written with the latest previous one
  FORWARD              the latest previous schema reads data written with the new one
  FULL                 both
  *_TRANSITIVE         the same against every previous version, not only the latest

BACKWARD asks ``fmt.incompatibilities(reader=new, writer=prev)``, FORWARD
``(reader=prev, writer=new)``. Each message is the format's, followed by which
previous version it concerns when more than one was checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spool.registry.formats import Format
from spool.registry.model import COMPATIBILITY_LEVELS


def directions(level: str) -> tuple[bool, bool]:
    """(backward, forward): which checks ``level`` asks for."""
    if level not in COMPATIBILITY_LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}")
    base = level.removesuffix("_TRANSITIVE")
    return base in ("BACKWARD", "FULL"), base in ("FORWARD", "FULL")


def transitive(level: str) -> bool:
    return level.endswith("_TRANSITIVE")


def against(level: str, previous: Sequence[Any]) -> list[Any]:
    """The previous versions ``level`` checks against: all of them, or the latest."""
    if level == "NONE" or not previous:
        return []
    return list(previous) if transitive(level) else [previous[-1]]


def check_pair(level: str, new: Any, old: Any, fmt: Format) -> list[str]:
    """``new`` against one previous version, in the directions ``level`` asks for."""
    backward, forward = directions(level)
    messages: list[str] = []
    if backward:
        messages += fmt.incompatibilities(new, old)
    if forward:
        messages += [m for m in fmt.incompatibilities(old, new) if m not in messages]
    return messages


def check(level: str, new: Any, previous: Sequence[Any], fmt: Format) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) under ``level``."""
    if level == "NONE" or not previous:
        directions(level)
        return []
    count = len(previous)
    first = 0 if transitive(level) else count - 1
    messages: list[str] = []
    for position in range(first, count):
        found = check_pair(level, new, previous[position], fmt)
        if transitive(level) and count > 1:
            found = [f"{m} (against previous version {position + 1} of {count})" for m in found]
        messages += found
    return messages
