"""Shared fixtures: a real broker process on an ephemeral port."""

from __future__ import annotations

import uuid

import pytest

from tests.helpers.broker_proc import BrokerProcess


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
