"""A local development cluster in one directory: ``spool cluster up`` and ``down``.

Layout of ``DIR`` (default ``./spool-cluster``)::

    cluster.id                 the id every node was formatted with
    node<i>/server.properties  node i's configuration (Kafka's keys)
    node<i>/data/              its log.dirs (and metadata log)
    node<i>/broker.log         its stdout and stderr
    node<i>/pid                its process id while it runs

``LocalCluster.create(dir, nodes, racks, base_port, host, overrides)`` writes
N combined nodes (``process.roles=broker,controller``, node ids 1..N, all
voters): node i listens for clients on ``PLAINTEXT://host:base_port+i-1`` and
for the quorum on ``CONTROLLER://host:base_port+100+i-1``; racks, when given,
go round-robin (``broker.rack``); ``overrides`` (``key=value``) go into every
node's file. Every dir is then formatted with one new cluster id and the same
``bootstrap_records`` (``spool cluster up --add-scram``: credentials salted once, so
whichever controller becomes active first writes the same ones).

``start()`` launches every node not running as ``spool broker --config FILE
--strict-config`` in its own session (it outlives the command), ``wait_ready``
polls until each node's PLAINTEXT listener answers Metadata listing all N
brokers (a process that exits meanwhile is reported with its log's tail),
``stop(timeout)`` sends SIGTERM and, after ``timeout`` seconds, SIGKILL. A
pid file is trusted only while ``/proc/<pid>/cmdline`` still names the node's
configuration file, so a recycled pid is never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spool.net.client import ClientError, NodeClient
from spool.protocol._generated import MetadataRequest
from spool.util.properties import format_properties, parse_properties

CONTROLLER_PORT_OFFSET = 100


class ClusterError(Exception):
    """The cluster cannot be created, started or stopped; the message says why."""


@dataclass
class LocalNode:
    node_id: int
    dir: Path

    @property
    def config(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log(self) -> Path:
        return self.dir / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.dir / "pid"

    def properties(self) -> dict[str, str]:
        return parse_properties(self.config.read_text(encoding="utf-8"))

    def address(self, listener: str = "PLAINTEXT") -> tuple[str, int]:
        for item in self.properties()["listeners"].split(","):
            name, _, rest = item.strip().partition("://")
            if name == listener:
                host, _, port = rest.rpartition(":")
                return host, int(port)
        raise ClusterError(f"node {self.node_id} has no {listener} listener")

    def pid(self) -> int | None:
        """The running process of this node, or None (no pid file, or a stale one)."""
        try:
            pid = int(self.pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        return pid if str(self.config).encode() in cmdline else None

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class LocalCluster:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def nodes(self) -> list[LocalNode]:
        found = []
        for d in self.root.glob("node*"):
            if d.name[4:].isdigit() and (d / "server.properties").exists():
                found.append(LocalNode(int(d.name[4:]), d))
        return sorted(found, key=lambda n: n.node_id)

    @property
    def exists(self) -> bool:
        return (self.root / "cluster.id").exists() and bool(self.nodes)

    @property
    def cluster_id(self) -> str:
        return (self.root / "cluster.id").read_text().strip()

    def bootstrap(self) -> str:
        return ",".join("{}:{}".format(*n.address()) for n in self.nodes)

    # ---- creating

    @classmethod
    def create(cls, root: Path, nodes: int, racks: list[str], base_port: int, host: str,
               overrides: list[str], bootstrap_records: Sequence[Any] = ()) -> LocalCluster:
        cluster = cls(root)
        ports = [(base_port + i, base_port + CONTROLLER_PORT_OFFSET + i) for i in range(nodes)]
        for i, (p, c) in enumerate(ports, 1):
            for port, what in ((p, "PLAINTEXT"), (c, "CONTROLLER")):
                _check_port_free(host, port, f"node {i}'s {what} listener")
        voters = ",".join(f"{i}@{host}:{c}" for i, (_, c) in enumerate(ports, 1))
        extra = dict(_split_override(o) for o in overrides)
        for i, (p, c) in enumerate(ports, 1):
            node = LocalNode(i, cluster.root / f"node{i}")
            props = {
                "process.roles": "broker,controller",
                "node.id": str(i),
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "listeners": f"PLAINTEXT://{host}:{p},CONTROLLER://{host}:{c}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "log.dirs": str((node.dir / "data").resolve()),
            }
            if racks:
                props["broker.rack"] = racks[(i - 1) % len(racks)]
            props.update(extra)
            node.dir.mkdir(parents=True, exist_ok=True)
            node.config.write_text(
                f"# spool cluster up: node {i} of {nodes}\n"
                + format_properties(props), encoding="utf-8")
        cluster.format(bootstrap_records)
        return cluster

    def format(self, bootstrap_records: Sequence[Any] = ()) -> str:
        """Format every node's dirs with one new cluster id (``cluster.id`` last) and the
        same bootstrap records (``--add-scram``'s credentials, salted once for all)."""
        from spool.broker.config import BrokerConfig, ConfigError
        from spool.broker.main import LogDirError, format_storage
        from spool.util.ids import random_uuid

        cid = random_uuid()
        for node in self.nodes:
            try:
                format_storage(BrokerConfig.load(node.config), cid,
                               bootstrap_records=bootstrap_records)
            except (ConfigError, LogDirError, OSError) as e:
                raise ClusterError(f"node {node.node_id}: {e}") from e
        (self.root / "cluster.id").write_text(cid + "\n")
        return cid

    # ---- running

    def start(self) -> list[tuple[LocalNode, int]]:
        """Launch every node that is not running; [(node, pid)] of those launched."""
        started = []
        for node in self.nodes:
            if node.pid() is not None:
                continue
            with open(node.log, "ab") as log:
                log.write(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} spool cluster up\n".encode())
                log.flush()
                proc = subprocess.Popen(
                    [sys.executable, "-m", "spool.cli.main", "broker", "--config",
                     str(node.config), "--strict-config"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, cwd=self.root)
            node.pid_file.write_text(f"{proc.pid}\n")
            started.append((node, proc.pid))
        return started

    def wait_ready(self, timeout: float) -> None:
        """Until every node's PLAINTEXT listener lists all nodes as brokers; ClusterError
        (naming the node and its log's tail) if one exits or time runs out."""
        asyncio.run(self._wait_ready(timeout))

    async def _wait_ready(self, timeout: float) -> None:
        nodes = self.nodes
        want = {n.node_id for n in nodes}
        deadline = time.monotonic() + timeout
        clients = {n.node_id: NodeClient(*n.address(), client_id="spool-cluster-up",
                                         request_timeout_ms=2000, connect_timeout_ms=2000)
                   for n in nodes}
        waiting = ""
        try:
            while True:
                waiting = ""
                for n in nodes:
                    if n.pid() is None:
                        raise ClusterError(f"node {n.node_id} exited; the end of {n.log}:\n"
                                           f"{n.tail()}")
                    try:
                        md = await clients[n.node_id].request(
                            MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
                    except ClientError as e:
                        waiting = f"node {n.node_id} does not answer yet ({e})"
                        break
                    seen = {b.node_id for b in md.brokers}
                    if seen != want or md.controller_id < 0:
                        waiting = (f"node {n.node_id} sees brokers {sorted(seen)} and controller "
                                   f"{md.controller_id}")
                        break
                if not waiting:
                    return
                if time.monotonic() > deadline:
                    raise ClusterError(f"not ready after {timeout:.0f} s: {waiting}")
                await asyncio.sleep(0.2)
        finally:
            await asyncio.gather(*(c.close() for c in clients.values()))

    def stop(self, timeout: float) -> list[tuple[LocalNode, int | None, str]]:
        """SIGTERM every running node, SIGKILL those still there after ``timeout`` s;
        [(node, pid, how)] with how in stopped, killed, not running."""
        out: list[tuple[LocalNode, int | None, str]] = []
        running = {}
        for node in self.nodes:
            pid = node.pid()
            if pid is None:
                out.append((node, None, "not running"))
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            running[node.node_id] = (node, pid)
        deadline = time.monotonic() + timeout
        while running and time.monotonic() < deadline:
            for nid, (node, pid) in list(running.items()):
                if node.pid() is None or _reaped(pid):
                    out.append((node, pid, "stopped"))
                    del running[nid]
            time.sleep(0.1)
        for node, pid in running.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            out.append((node, pid, "killed"))
        for node in self.nodes:
            with contextlib.suppress(OSError):
                node.pid_file.unlink()
        return sorted(out, key=lambda t: t[0].node_id)


def _reaped(pid: int) -> bool:
    """True when ``pid`` is gone or a zombie (it exited; its parent, not us, reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def _check_port_free(host: str, port: int, what: str) -> None:
    if not 0 < port < 65536:
        raise ClusterError(f"port {port} for {what} is out of range; choose another --base-port")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker binds
        try:
            s.bind((host, port))
        except OSError as e:
            raise ClusterError(f"{host}:{port} ({what}) is not free: {e.strerror}; choose "
                               f"another --base-port") from None


def _split_override(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ClusterError(f"override {item!r} is not key=value")
    return key.strip(), value.strip()
