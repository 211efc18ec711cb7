"""The pytest plugin (entry point ``pytest11``, name ``spool``): Spool fixtures for any project.

Installed with Spool, it loads in every pytest run of that environment
(``-p no:spool`` turns it off) and imports nothing of Spool until a test
asks for a fixture:

- ``spool_broker`` (session scope): the bootstrap string
  (``"127.0.0.1:PORT"``) of one broker for the session
  (``spool.testing.running_broker``, in-process); each pytest-xdist worker
  starts its own.
- ``spool_topic`` (function scope): a factory,
  ``spool_topic(partitions=1, config=None, name=None) -> str``, that
  creates a topic on ``spool_broker`` (by default named after the test,
  with a random suffix, so tests sharing the broker never share a topic)
  and deletes every topic it made when the test ends.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator, Mapping

import pytest


@pytest.fixture(scope="session")
def spool_broker() -> Iterator[str]:
    """One Spool broker for the session; its bootstrap string."""
    from spool.testing import running_broker

    with running_broker() as bootstrap:
        yield bootstrap


@pytest.fixture
def spool_topic(
    spool_broker: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """A factory of topics on ``spool_broker``, deleted when the test ends."""
    from spool.testing import create_topic, delete_topics

    made: list[str] = []

    def make(partitions: int = 1, config: Mapping[str, str] | None = None,
             name: str | None = None) -> str:
        if name is None:
            stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:180].strip("-")
            name = f"{stem}-{uuid.uuid4().hex[:8]}"
        create_topic(spool_broker, name, partitions, config)
        made.append(name)
        return name

    yield make
    delete_topics(spool_broker, made)
