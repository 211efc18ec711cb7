"""Connect fixtures: a real PostgreSQL server, and the session's real broker.

- ``pg``: one PostgreSQL server (``tests.helpers.postgres.PostgresServer``) per test
  process (per xdist worker), ``wal_level=logical``, stopped at the session's end. Tests
  share it: each makes the databases it uses with ``pg_database``.
- ``pg_database``: a new database on ``pg``, named after the test; its name.
- ``registry``: a ``spool registry`` process on the session's broker, for the module.
- ``broker`` (tests/conftest.py): the session's broker; ``fresh_broker`` one of the test's
  own.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator

import pytest

from tests.helpers.postgres import PostgresServer
from tests.helpers.registry_proc import RegistryProcess


@pytest.fixture(scope="session")
def pg() -> Iterator[PostgresServer]:
    server = PostgresServer.in_temp_dir().start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.base_dir, ignore_errors=True)


@pytest.fixture
def pg_database(pg: PostgresServer, request) -> str:
    base = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]
    return pg.create_database(f"{base}_{uuid.uuid4().hex[:6]}")


@pytest.fixture(scope="module")
def registry(broker, tmp_path_factory) -> Iterator[RegistryProcess]:
    reg = RegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry") / "registry.log")
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()
