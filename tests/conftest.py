"""Shared fixtures: a real broker process on an ephemeral port; a watchdog behind pytest-timeout.

`make test` runs tests/spark and tests/console in one pytest process of their own (one JVM
and its clusters, one browser) beside `pytest -n auto` over the rest (see the Makefile).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import uuid

import pytest

from tests.helpers.broker_proc import BrokerProcess


def pytest_configure(config):
    """Spool's pytest plugin (``spool_broker``, ``spool_topic``) loads through its ``pytest11``
    entry point once Spool is installed; an environment installed before the entry point
    existed gets it here, under the same name."""
    pm = config.pluginmanager
    if not pm.has_plugin("spool") and not pm.is_blocked("spool"):  # -p no:spool: honoured
        from spool.testing import pytest_plugin

        pm.register(pytest_plugin, "spool")


WATCHDOG_GRACE_S = 120.0


def _descendants(root: int) -> list[int]:
    """Every live process under ``root`` (read from /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def _hung(nodeid: str, after: float) -> None:
    """The test outlived its pytest-timeout by the grace period: the timeout's exception was
    swallowed, or a teardown blocks. Dump every thread, kill what this worker started (brokers,
    JVMs) and end the worker, so xdist reports the crash and the suite goes on instead of
    running into CI's wall clock."""
    sys.stderr.write(f"\n+++ watchdog: {nodeid} still running after {after:.0f} s: "
                     f"killing this test process +++\n")
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(70)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A second stage behind pytest-timeout: its signal method only raises once, in the main
    thread, and a hang in code that catches the exception or in a teardown (a Spark query
    that never stops) would otherwise hold the whole run until CI's limit. Under xdist the
    ended worker is reported as a crash while running this test and replaced."""
    marker = item.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else float(
        item.config.getini("timeout") or 0)
    timer = None
    if limit > 0:
        after = limit + WATCHDOG_GRACE_S
        timer = threading.Timer(after, _hung, args=(item.nodeid, after))
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


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
