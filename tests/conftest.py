"""Shared fixtures: a real broker process on an ephemeral port; how xdist splits the suite."""

from __future__ import annotations

import uuid

import pytest

from tests.helpers.broker_proc import BrokerProcess

SERIAL_SCOPES = ("tests/spark/", "tests/console/")  # console: one broker, one browser


def pytest_configure(config):
    """Spool's pytest plugin (``spool_broker``, ``spool_topic``) loads through its ``pytest11``
    entry point once Spool is installed; an environment installed before the entry point
    existed gets it here, under the same name."""
    pm = config.pluginmanager
    if not pm.has_plugin("spool") and not pm.is_blocked("spool"):  # -p no:spool: honoured
        from spool.testing import pytest_plugin

        pm.register(pytest_plugin, "spool")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``pytest -n``: every test is its own work unit, except that each of
    SERIAL_SCOPES goes to one worker as a whole (the Spark tier shares one JVM per
    worker; it is the largest unit, so it is handed out first). ``--dist
    loadgroup`` cannot do this: xdist 3.8 renames ``item._nodeid``, which pytest
    9.2 no longer reads."""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduler(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((s for s in SERIAL_SCOPES if nodeid.startswith(s)), nodeid)

    return Scheduler(config, log)


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """One broker for the whole session (tests use their own unique topics)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data")
    b.start()
    yield b
    b.stop()


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of this test's own, for tests that kill or reconfigure it."""
    b = BrokerProcess(tmp_path / "data")
    yield b
    b.stop()


@pytest.fixture
def topic_name(request) -> str:
    return f"t-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")
