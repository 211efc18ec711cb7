"""Spool in your tests: a real broker, or a real cluster, without Docker or a JVM.

``running_broker(config=None, *, isolation="thread")`` is a context manager:
it starts one broker (Kafka's single-node defaults, plus
``group.initial.rebalance.delay.ms=0``) listening on a free 127.0.0.1 port
with its data in a new temporary directory, yields the bootstrap string
(``"127.0.0.1:PORT"``) once the broker serves, and on exit stops it and
removes the directory. ``config`` takes Kafka's broker keys
(``{"num.partitions": "3"}``); a key the broker does not know, or a value
it cannot honour, raises ``spool.broker.config.ConfigError`` before
anything starts.

Isolation (docs/BENCHMARKS.md, ``bench.embedded``, has the figures):

- ``"thread"`` (the default): the broker runs on its own event loop
  (uvloop) in a daemon thread of the calling process. Once Spool is
  imported (the first broker pays that, about 0.3 s with Spool's bytecode
  cached, 1 s when compiled) a broker answers its first Metadata 15-120 ms
  after the call, against ~0.65 s for a process: a child pays the
  interpreter and Spool's imports every time. It is as real
  as a process on the wire (clients reach it over TCP), and it holds no
  process-wide state: it installs no signal handler, configures no
  logging (its records go to the ``spool`` loggers, which pytest captures)
  and leaves the descriptor limit alone. It shares the interpreter lock
  with the test: clients written in C (confluent-kafka) run beside it
  unhindered, a test that spins in Python slows it.
- ``"process"``: ``spool broker`` in a child process (``sys.executable
  -m spool.cli.main``): a broker the test may kill, or one that must not
  share anything with the test. Its log is in the temporary directory and
  its tail is in the error raised when it does not start.

``running_cluster(nodes=3, config=None)`` starts ``nodes`` combined nodes
(broker and KRaft controller each, all voters) as ``spool cluster up``
does (``spool.cli.local_cluster``: the same files, formatting and
readiness check: every node's listener lists every broker and a
controller), on free ports in a temporary directory, yields the bootstrap
string of every node (comma-separated) and stops them on exit (SIGTERM,
then SIGKILL after 2 s: nodes stopping together wait for a controller
that is stopping too, and the data is thrown away). Nodes are processes: a cluster in one
interpreter would share one lock across its nodes.

``create_topic(bootstrap, name, partitions=1, config=None)`` and
``delete_topics(bootstrap, names)`` are the admin calls the pytest plugin
(``spool.testing.pytest_plugin``) makes; they raise ``RuntimeError``
naming the topic and Kafka's error.
"""

from __future__ import annotations

import contextlib
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

__all__ = ["create_topic", "delete_topics", "running_broker", "running_cluster"]

# Kafka's single-node test settings (as testcontainers' Kafka module sets them): a group's
# first join does not wait 3 s for more members.
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
_LISTEN = re.compile(rb"listening on ([0-9a-fA-F.:]+):(\d+)")


@contextlib.contextmanager
def running_broker(
    config: Mapping[str, str] | None = None,
    *,
    isolation: Literal["thread", "process"] = "thread",
    timeout: float = 30.0,
) -> Iterator[str]:
    """A broker on a free 127.0.0.1 port in a temporary directory; yields its bootstrap."""
    if isolation not in ("thread", "process"):
        raise ValueError(f"isolation must be 'thread' or 'process', not {isolation!r}")
    tmp = Path(tempfile.mkdtemp(prefix="spool-broker-"))
    settings = {
        "log.dirs": str(tmp / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        **TEST_DEFAULTS,
        **{k: str(v) for k, v in (config or {}).items()},
    }
    try:
        runner = _ThreadBroker(settings) if isolation == "thread" else _ProcessBroker(settings, tmp)
        bootstrap = runner.start(timeout)
        try:
            yield bootstrap
        finally:
            runner.stop(timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _ThreadBroker:
    """A ``spool.broker.broker.Broker`` on a uvloop event loop in a daemon thread."""

    def __init__(self, settings: dict[str, str]) -> None:
        from spool.broker.config import BrokerConfig, ConfigError

        cfg = BrokerConfig.load(None, [f"{k}={v}" for k, v in settings.items()])
        if cfg.unknown:
            raise ConfigError(f"unknown configuration key(s): {', '.join(sorted(cfg.unknown))}")
        self.config = cfg
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._bootstrap = ""
        self._loop = None
        self._stop = None
        self._thread = threading.Thread(target=self._run, name="spool-embedded-broker",
                                        daemon=True)

    def start(self, timeout: float) -> str:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"the embedded broker did not start within {timeout:.0f} s")
        if self._error is not None:
            raise self._error
        return self._bootstrap

    def _run(self) -> None:
        import uvloop

        try:
            uvloop.run(self._main())
        except BaseException as e:  # noqa: BLE001  (handed to the caller of start)
            if not self._ready.is_set():
                self._error = e
                self._ready.set()
            else:
                raise

    async def _main(self) -> None:
        import asyncio

        import spool.broker.handlers  # noqa: F401  (registers every handler)
        from spool.broker.broker import Broker

        broker = Broker(self.config)
        await broker.start()
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        host, port = broker.server.bound_listeners[self.config.cluster.listeners[0].name]
        self._bootstrap = f"{host}:{port}"
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await broker.shutdown()

    def stop(self, timeout: float) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"the embedded broker did not stop within {timeout:.0f} s")


class _ProcessBroker:
    """``spool broker`` in a child process; its stdout says where it listens."""

    def __init__(self, settings: dict[str, str], tmp: Path) -> None:
        self.settings = settings
        self.log_path = tmp / "broker.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float) -> str:
        cmd = [sys.executable, "-m", "spool.cli.main", "broker", "--strict-config"]
        for k, v in self.settings.items():
            cmd += ["--override", f"{k}={v}"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=log)
        found: list[str] = []
        got = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                m = _LISTEN.search(line)
                if m and not found:
                    found.append(f"{m.group(1).decode()}:{m.group(2).decode()}")
                    got.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not got.wait(0.02):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                how = (f"exited with {self.proc.returncode}" if self.proc.poll() is not None
                       else f"did not start within {timeout:.0f} s")
                self.stop(5)
                raise RuntimeError(f"spool broker {how}: {self._tail()}")
        return found[0]

    def _tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def running_cluster(
    nodes: int = 3,
    config: Mapping[str, str] | None = None,
    *,
    timeout: float = 60.0,
) -> Iterator[str]:
    """``nodes`` combined KRaft nodes (processes) on free ports; yields every node's address."""
    from spool.cli.local_cluster import CONTROLLER_PORT_OFFSET, ClusterError, LocalCluster

    if nodes < 1:
        raise ValueError(f"nodes must be at least 1, not {nodes}")
    tmp = Path(tempfile.mkdtemp(prefix="spool-cluster-"))
    overrides = [f"{k}={v}" for k, v in {**TEST_DEFAULTS, **(config or {})}.items()]
    cluster = None
    try:
        for _ in range(20):  # another process may take a port between the check and the bind
            base = _free_base_port(nodes, CONTROLLER_PORT_OFFSET)
            try:
                cluster = LocalCluster.create(tmp / "cluster", nodes, [], base, "127.0.0.1",
                                              overrides)
                break
            except ClusterError as e:
                if "is not free" not in str(e):
                    raise
                shutil.rmtree(tmp / "cluster", ignore_errors=True)
        if cluster is None:
            raise RuntimeError("found no free ports for the cluster")
        cluster.start()
        try:
            cluster.wait_ready(timeout)
        except ClusterError as e:
            raise RuntimeError(f"the cluster did not start: {e}") from None
        yield cluster.bootstrap()
    finally:
        if cluster is not None:
            cluster.stop(2.0)
        shutil.rmtree(tmp, ignore_errors=True)


def _free_base_port(nodes: int, offset: int) -> int:
    """A port p with p..p+nodes-1 and p+offset..p+offset+nodes-1 free on 127.0.0.1, below
    Linux's ephemeral range (32768-60999), so outgoing connections do not take them."""
    for _ in range(200):
        base = random.randrange(20000, 32768 - offset - nodes)
        ports = [*range(base, base + nodes), *range(base + offset, base + offset + nodes)]
        if all(_port_free(p) for p in ports):
            return base
    raise RuntimeError("found no free ports for the cluster")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "spool-testing"})


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: Mapping[str, str] | None = None,
    *, replication_factor: int = -1, timeout: float = 30.0,
) -> str:
    """CreateTopics ``name``; returns ``name`` once the broker reports it created."""
    from confluent_kafka.admin import NewTopic

    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                     config={k: str(v) for k, v in (config or {}).items()})
    admin = _admin(bootstrap)  # referenced until the answer: its handle ends with it
    future = admin.create_topics([topic], operation_timeout=timeout,
                                 request_timeout=timeout)[name]
    try:
        future.result(timeout)
    except Exception as e:
        raise RuntimeError(f"could not create topic {name}: {_kafka_error(e)}") from None
    return name


def delete_topics(bootstrap: str, names: list[str], *, timeout: float = 30.0) -> None:
    """DeleteTopics ``names`` (a topic already gone is not an error)."""
    if not names:
        return
    admin = _admin(bootstrap)
    futures = admin.delete_topics(list(names), operation_timeout=timeout,
                                  request_timeout=timeout)
    for name, future in futures.items():
        try:
            future.result(timeout)
        except Exception as e:
            if "UNKNOWN_TOPIC" not in _kafka_error(e):
                raise RuntimeError(f"could not delete topic {name}: {_kafka_error(e)}") from None


def _kafka_error(e: BaseException) -> str:
    err = e.args[0] if e.args else e
    name = getattr(err, "name", None)
    if callable(name):
        return f"{name()}: {err.str()}"
    return str(e)

