"""A cluster of real ``spool broker`` processes on loopback: start, kill -9, restart, cut links.

``Cluster(base_dir, roles=..., racks=...)`` lays out one node per entry of
``roles`` (``"broker,controller"`` for a combined node, ``"controller"``,
``"broker"``), node ids 1..N, each with its own ``nodeN/data`` log dir,
``nodeN.properties`` (Kafka's keys: ``process.roles``, ``node.id``,
``controller.quorum.voters``, ``controller.listener.names``, ``listeners``
``PLAINTEXT://...,CONTROLLER://...``, ``broker.rack``, ...) and ``nodeN.log``
(stdout and stderr). ``start()`` asks ``spool storage random-uuid`` for a
cluster id, formats every node with ``spool storage format --cluster-id ID
--config FILE`` (the real CLI), starts every node with ``--strict-config``
and waits until each listens (its broker listener answers ApiVersions).

Ports: each node's listener ports are reserved (a socket bound with
SO_REUSEADDR and never listening holds the port against other binds and
against the kernel's choice of a local port for outgoing connections) from
before the node starts until it listens, and again whenever it is down; the
node binds them beside the reservation (SO_REUSEADDR too). They are kept
across restarts.
With ``proxied=True`` (the default) the nodes reach each other's controller
listener only through ``self.net`` (a ``FaultNet``: one proxy per directed
pair), so a test can ``net.isolate(n)``, ``net.partition([1], [2, 3])`` and
``net.heal()``; every node's ``controller.quorum.voters`` names the proxies
it dials (its own entry is its own listener). ``proxied=False`` gives every
node the same, plain ``controller.quorum.voters``. Clients (the tests)
always reach every listener directly.

With ``replication_proxied=True`` brokers reach each other's broker
listeners (replica fetches, transaction markers: whatever a broker dials
with its ``inter.broker.listener.name``) only through ``self.rnet``, a
``FaultNet`` of its own: broker X binds one more listener per broker k,
``R{k}`` (a PLAINTEXT listener), advertises it at the proxy ``k -> X`` (its
own ``R{X}`` at its real port) and names ``R{X}`` its
``inter.broker.listener.name``; so broker k, asking the metadata for X's
``R{k}`` endpoint, dials the proxy ``k -> X``. ``rnet.cut(f, l)`` then
cuts follower f from leader l and nothing else (Kafka allows a broker its
own inter-broker listener name as long as every broker advertises it).

A node: ``kill()`` (SIGKILL), ``stop()`` (SIGTERM, waits for the exit code),
``start()`` on the same dirs and ports, ``restart()`` = kill + start.

Asking the cluster, each time over a fresh connection to one node:
``quorum(node)`` (DescribeQuorum on its controller listener: leader, epoch,
high watermark, voters' log end offsets), ``active_controller()`` (the
leader of the highest epoch any live controller reports, as reported by the
leader itself), ``metadata(node)`` (Metadata v12: brokers with racks,
controller id), ``partitions(node, topic)`` (Metadata v12 of one topic:
each partition's leader, leader epoch, replicas, ISR, offline replicas),
``registered_brokers(node)`` (DescribeCluster v2 with fenced
brokers: every registration, fenced or not). ``wait_until(what, fn, timeout)`` polls ``fn`` until it
returns something truthy that is not a string (a string is the reason it
is not there yet) and returns it, or raises ``ClusterTimeout`` saying
what did not happen, the last value seen, and the tail of every node's log.
``logs()`` gives every node's log tail; the cluster fixture prints it when a
test fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from spool.protocol._generated import (
    ApiVersionsRequest,
    DescribeClusterRequest,
    DescribeQuorumRequest,
    MetadataRequest,
)
from spool.protocol._generated.describe_quorum_request import PartitionData, TopicData
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import error_name
from tests.helpers.fault_proxy import FaultNet
from tests.helpers.raw_client import RawClient

T = TypeVar("T")
COMBINED = "broker,controller"
METADATA_TOPIC = "__cluster_metadata"
SPOOL = [sys.executable, "-m", "spool.cli.main"]


class ClusterTimeout(AssertionError):
    """Something the test waited for did not happen; the message says what and shows logs."""


def reserve_port() -> socket.socket:
    """A socket holding an ephemeral 127.0.0.1 port (bound, SO_REUSEADDR, not listening)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    return s


@dataclasses.dataclass
class QuorumState:
    """One DescribeQuorum answer for ``__cluster_metadata``-0."""

    asked: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: dict[int, int]  # replica id -> log end offset
    observers: dict[int, int]


@dataclasses.dataclass
class ClusterMetadata:
    """One Metadata answer: what a node tells clients about the cluster."""

    asked: int
    controller_id: int
    cluster_id: str | None
    brokers: dict[int, tuple[str, int, str | None]]  # id -> (host, port, rack)


@dataclasses.dataclass(frozen=True)
class PartitionState:
    """One partition as a node's Metadata shows it."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


class ClusterNode:
    """One node of a ``Cluster``: its config, dirs, ports and process."""

    def __init__(self, cluster: Cluster, node_id: int, roles: str, rack: str | None) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.roles = roles
        self.rack = rack
        base = cluster.base_dir
        self.data_dir = base / f"node{node_id}" / "data"
        self.config_path = base / f"node{node_id}.properties"
        self.log_path = base / f"node{node_id}.log"
        self.proc: subprocess.Popen | None = None
        self._reserved: list[socket.socket] = []
        self.broker_port = self._reserve() if self.is_broker else 0
        self.controller_port = self._reserve() if self.is_controller else 0
        # replication_proxied: the port of listener R{k} (for broker k's connections to us)
        self.replication_ports: dict[int, int] = {}
        # more ports a test gives the node's listeners (``reserve_extra``), held like the others
        self.extra_ports: list[int] = []

    def _reserve(self) -> int:
        s = reserve_port()
        self._reserved.append(s)
        return s.getsockname()[1]

    def reserve_extra(self) -> int:
        """One more port for a listener the test configures (``node_overrides``); held
        while the node is down, as its own ports are."""
        port = self._reserve()
        self.extra_ports.append(port)
        return port

    def _rereserve(self) -> None:
        """Hold this node's ports again while it is down (until the next launch)."""
        for port in (self.broker_port, self.controller_port, *self.replication_ports.values(),
                     *self.extra_ports):
            if port and not any(s.getsockname()[1] == port for s in self._reserved):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    s.close()
                    continue
                self._reserved.append(s)

    def _release(self) -> None:
        for s in self._reserved:
            s.close()
        self._reserved.clear()

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles.split(",")

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles.split(",")

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT listener (a broker's); a controller-only node has none."""
        assert self.is_broker, f"node {self.node_id} is not a broker"
        return f"127.0.0.1:{self.broker_port}"

    @property
    def controller_address(self) -> str:
        assert self.is_controller, f"node {self.node_id} is not a controller"
        return f"127.0.0.1:{self.controller_port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def properties(self) -> dict[str, str]:
        listeners = []
        if self.is_broker:
            listeners.append(f"PLAINTEXT://127.0.0.1:{self.broker_port}")
        if self.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        props = {
            "process.roles": self.roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": ",".join(
                f"{c.node_id}@{self.cluster.controller_address_for(self, c)}"
                for c in self.cluster.controllers),
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
        }
        if self.is_broker:
            props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.broker_port}"
            props["inter.broker.listener.name"] = "PLAINTEXT"
            if self.replication_ports:
                rnames = [f"R{k}" for k in sorted(self.replication_ports)]
                props["listeners"] += "".join(f",R{k}://127.0.0.1:{port}" for k, port
                                              in sorted(self.replication_ports.items()))
                props["advertised.listeners"] += "".join(
                    f",R{k}://{self.cluster.replication_address_for(k, self)}"
                    for k in sorted(self.replication_ports))
                props["listener.security.protocol.map"] += "".join(
                    f",{n}:PLAINTEXT" for n in rnames)
                props["inter.broker.listener.name"] = f"R{self.node_id}"
            props["group.initial.rebalance.delay.ms"] = "0"
            if self.rack is not None:
                props["broker.rack"] = self.rack
        props.update(self.cluster.overrides)
        props.update(self.cluster.node_overrides.get(self.node_id, {}))
        return props

    def write_config(self) -> Path:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "".join(f"{k}={v}\n" for k, v in self.properties().items()))
        return self.config_path

    def format(self, cluster_id: str) -> str:
        self.write_config()
        out = subprocess.run([*SPOOL, "storage", "format", "--cluster-id", cluster_id,
                              "--config", str(self.config_path), *self.cluster.format_args],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"spool storage format (node {self.node_id}) exited "
                               f"{out.returncode}: {out.stdout}{out.stderr}")
        return out.stdout

    def launch(self) -> None:
        """Start the process (not waiting for it to serve)."""
        assert not self.alive, f"node {self.node_id} is already running"
        self.write_config()
        cmd = [*SPOOL, "broker", "--config", str(self.config_path), "--strict-config",
               "--log-level", self.cluster.log_level]
        with open(self.log_path, "ab") as log:
            log.write(f"==== {time.strftime('%H:%M:%S')} start: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

    def listening(self) -> bool:
        """The broker listener answers ApiVersions; the controller listener accepts."""
        if self.is_controller:
            try:
                socket.create_connection(("127.0.0.1", self.controller_port), timeout=2).close()
            except OSError:
                return False
        if self.is_broker:
            try:
                c = RawClient(self.bootstrap, timeout=2)
                try:
                    c.request(18, 3, ApiVersionsRequest(client_software_name="spool-tests",
                                                        client_software_version="0"))
                finally:
                    c.close()
            except (OSError, ConnectionError, ValueError):
                return False
        return True

    def wait_listening(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.listening():  # (our reservation does not listen: only the node answers)
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"node {self.node_id} exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ClusterTimeout(f"node {self.node_id} not listening within {timeout} s:\n"
                                     f"{self.log_tail()}")
            time.sleep(0.05)
        self._release()

    def start(self, timeout: float = 60.0) -> ClusterNode:
        self.launch()
        self.wait_listening(timeout)
        return self

    def kill(self) -> None:
        """kill -9: no flush, no clean shutdown."""
        if self.alive:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self._rereserve()
            self._mark("killed (SIGKILL)")

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait for a graceful exit; its exit code (None if never started;
        after ``timeout`` it is killed and -9 is returned)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return -9
            self._rereserve()
            self._mark(f"stopped (SIGTERM), exit {self.proc.returncode}")
        return self.proc.returncode

    def restart(self, timeout: float = 60.0) -> ClusterNode:
        self.kill()
        return self.start(timeout)

    def _mark(self, what: str) -> None:
        with contextlib.suppress(OSError), open(self.log_path, "ab") as log:
            log.write(f"==== {time.strftime('%H:%M:%S')} {what}\n".encode())

    def log_tail(self, n: int = 6000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""


class Cluster:
    """N nodes on loopback, formatted with one cluster id (see the module doc)."""

    def __init__(
        self,
        base_dir: Path,
        roles: Sequence[str] = (COMBINED,) * 3,
        racks: Sequence[str | None] | None = None,
        *,
        proxied: bool = True,
        replication_proxied: bool = False,
        overrides: dict[str, str] | None = None,
        node_overrides: dict[int, dict[str, str]] | None = None,
        log_level: str = "INFO",
        format_args: Sequence[str] = (),
    ) -> None:
        self.base_dir = Path(base_dir)
        self.format_args = list(format_args)  # more `spool storage format` options (--add-scram)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.overrides = dict(overrides or {})
        self.node_overrides = dict(node_overrides or {})
        self.log_level = log_level
        self.cluster_id: str | None = None
        racks = list(racks) if racks is not None else [None] * len(roles)
        assert len(racks) == len(roles)
        self.nodes: dict[int, ClusterNode] = {}
        for i, (r, rack) in enumerate(zip(roles, racks, strict=True), start=1):
            self.nodes[i] = ClusterNode(self, i, r, rack if "broker" in r else None)
        self.net: FaultNet | None = None
        if proxied:
            self.net = FaultNet({c.node_id: ("127.0.0.1", c.controller_port)
                                 for c in self.controllers})
        self.rnet: FaultNet | None = None
        if replication_proxied:
            for x in self.brokers:
                for k in self.brokers:
                    x.replication_ports[k.node_id] = x._reserve()
            self.rnet = FaultNet({b.node_id: ("127.0.0.1", b.broker_port) for b in self.brokers})
            for (src, dst), link in self.rnet.links.items():
                link.target = ("127.0.0.1", self.nodes[dst].replication_ports[src])

    # --- layout -------------------------------------------------------------------------

    @property
    def controllers(self) -> list[ClusterNode]:
        return [n for n in self.nodes.values() if n.is_controller]

    @property
    def brokers(self) -> list[ClusterNode]:
        return [n for n in self.nodes.values() if n.is_broker]

    def controller_address_for(self, src: ClusterNode, dst: ClusterNode) -> str:
        """What ``src`` dials to reach ``dst``'s controller listener."""
        if self.net is None or src.node_id == dst.node_id:
            return dst.controller_address
        if not src.is_controller:  # a broker-only node: its own links in the net
            return self._broker_link(src, dst)
        return self.net.address(src.node_id, dst.node_id)

    def replication_address_for(self, src: int, dst: ClusterNode) -> str:
        """Where broker ``src`` reaches broker ``dst``'s listener ``R{src}``."""
        if src == dst.node_id or self.rnet is None:
            return f"127.0.0.1:{dst.replication_ports[src]}"
        return self.rnet.address(src, dst.node_id)

    def _broker_link(self, src: ClusterNode, dst: ClusterNode) -> str:
        from tests.helpers.fault_proxy import LinkProxy

        assert self.net is not None
        key = (src.node_id, dst.node_id)
        if key not in self.net.links:
            self.net.links[key] = LinkProxy(("127.0.0.1", dst.controller_port),
                                            name=f"{src.node_id}->{dst.node_id}")
        return self.net.links[key].address

    @property
    def bootstrap(self) -> str:
        """Every broker's PLAINTEXT listener, comma-separated (a client's bootstrap.servers)."""
        return ",".join(b.bootstrap for b in self.brokers)

    def live_bootstrap(self, exclude: Sequence[int] = ()) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.alive and b.node_id not in exclude)

    @property
    def expected_racks(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self.brokers}

    # --- lifecycle ----------------------------------------------------------------------

    def format(self) -> str:
        out = subprocess.run([*SPOOL, "storage", "random-uuid"], capture_output=True,
                             text=True, timeout=60)
        if out.returncode != 0 or not out.stdout.strip():
            raise RuntimeError(f"spool storage random-uuid exited {out.returncode}: "
                               f"{out.stdout}{out.stderr}")
        self.cluster_id = out.stdout.strip()
        for n in self.nodes.values():
            n.format(self.cluster_id)
        return self.cluster_id

    def start(self, timeout: float = 90.0) -> Cluster:
        """Format (first time only), start every node, wait until each listens."""
        if self.cluster_id is None:
            self.format()
        for n in self.nodes.values():
            if not n.alive:
                n.launch()
        for n in self.nodes.values():
            n.wait_listening(timeout)
        return self

    def stop(self) -> None:
        for n in self.nodes.values():
            if n.alive and n.proc is not None:
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes.values():
            n.stop(timeout=20)
            n._release()
        for net in (self.net, self.rnet):
            if net is not None:
                net.close()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- asking -------------------------------------------------------------------------

    def quorum(self, node: int, timeout: float = 5.0) -> QuorumState | str:
        """DescribeQuorum on ``node``'s controller listener; an error string when it could not
        answer (not the leader, unreachable...)."""
        n = self.nodes[node]
        req = DescribeQuorumRequest(topics=[TopicData(
            topic_name=METADATA_TOPIC, partitions=[PartitionData(partition_index=0)])])
        try:
            c = RawClient(n.controller_address, timeout=timeout)
            try:
                r = c.request(55, 1, req)
            finally:
                c.close()
        except (OSError, ConnectionError) as e:
            return f"node {node}: {type(e).__name__}: {e}"
        if r.error_code != 0:
            return f"node {node}: {error_name(r.error_code)}"
        if not r.topics or not r.topics[0].partitions:
            return f"node {node}: empty DescribeQuorum answer"
        p = r.topics[0].partitions[0]
        if p.error_code != 0:
            return f"node {node}: {error_name(p.error_code)}"
        return QuorumState(node, p.leader_id, p.leader_epoch, p.high_watermark,
                           {v.replica_id: v.log_end_offset for v in p.current_voters},
                           {o.replica_id: o.log_end_offset for o in p.observers})

    def quorum_states(self) -> list[QuorumState | str]:
        return [self.quorum(c.node_id) for c in self.controllers if c.alive]

    def active_controller(self, exclude: Sequence[int] = ()) -> QuorumState | None:
        """The live leader of the highest epoch, as it describes itself (a deposed leader that
        has not heard of the new epoch answers too, with its older epoch)."""
        best: QuorumState | None = None
        for s in self.quorum_states():
            if (isinstance(s, QuorumState) and s.leader_id == s.asked
                    and s.leader_id not in exclude
                    and (best is None or s.leader_epoch > best.leader_epoch)):
                best = s
        return best

    def metadata(self, node: int, timeout: float = 5.0) -> ClusterMetadata | str:
        n = self.nodes[node]
        try:
            c = RawClient(n.bootstrap, timeout=timeout)
            try:
                md = c.request(3, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))
            finally:
                c.close()
        except (OSError, ConnectionError) as e:
            return f"node {node}: {type(e).__name__}: {e}"
        return ClusterMetadata(node, md.controller_id, md.cluster_id,
                               {b.node_id: (b.host, b.port, b.rack) for b in md.brokers})

    def partitions(self, node: int, topic: str, timeout: float = 5.0
                   ) -> dict[int, PartitionState] | str:
        """Metadata v12 for ``topic`` from ``node``: ``{partition: PartitionState}``; an error
        string when it could not answer or does not know the topic."""
        try:
            c = RawClient(self.nodes[node].bootstrap, timeout=timeout)
            try:
                md = c.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                      allow_auto_topic_creation=False))
            finally:
                c.close()
        except (OSError, ConnectionError) as e:
            return f"node {node}: {type(e).__name__}: {e}"
        t = next((t for t in md.topics if t.name == topic), None)
        if t is None or t.error_code != 0:
            return f"node {node}: {topic}: {None if t is None else error_name(t.error_code)}"
        return {p.partition_index: PartitionState(p.leader_id, p.leader_epoch,
                                                  tuple(p.replica_nodes), tuple(p.isr_nodes),
                                                  tuple(p.offline_replicas))
                for p in sorted(t.partitions, key=lambda p: p.partition_index)}

    def registered_brokers(self, node: int, timeout: float = 5.0
                           ) -> dict[int, tuple[str | None, bool]] | str:
        """DescribeCluster v2 with include_fenced_brokers from ``node``: every registered
        broker, ``{id: (rack, is_fenced)}``; an error string when it could not answer."""
        try:
            c = RawClient(self.nodes[node].bootstrap, timeout=timeout)
            try:
                r = c.request(60, 2, DescribeClusterRequest(include_fenced_brokers=True))
            finally:
                c.close()
        except (OSError, ConnectionError) as e:
            return f"node {node}: {type(e).__name__}: {e}"
        if r.error_code != 0:
            return f"node {node}: {error_name(r.error_code)}: {r.error_message}"
        return {b.broker_id: (b.rack, b.is_fenced) for b in r.brokers}

    def wait_until(self, what: str, fn: Callable[[], T], timeout: float = 30.0,
                   every: float = 0.1) -> T:
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = fn()
            except Exception as e:  # noqa: BLE001  (a probe failing is a value to report)
                last = f"{type(e).__name__}: {e}"
            if last and not isinstance(last, str):
                return last
            if time.monotonic() > deadline:
                raise ClusterTimeout(f"{what}: not within {timeout} s; last seen: {last!r}\n"
                                     f"{self.logs(2500)}")
            time.sleep(every)

    def wait_formed(self, timeout: float = 60.0) -> QuorumState:
        """Until a controller leads and every live broker lists every broker (by id and rack)
        with that leader as controller (any broker, when the leader is not one, as Kafka
        does); returns the leader's DescribeQuorum answer."""
        want = {b.node_id: b.rack for b in self.brokers}

        def formed() -> QuorumState | str:
            leader = self.active_controller()
            if leader is None:
                return f"no leader: {self.quorum_states()}"
            for b in self.brokers:
                if not b.alive:
                    continue
                md = self.metadata(b.node_id)
                if isinstance(md, str):
                    return md
                racks = {i: rack for i, (_, _, rack) in md.brokers.items()}
                # A controller that is also a broker is named; otherwise Kafka names a live
                # broker (clients cannot reach a controller-only node).
                controller_ok = (md.controller_id == leader.leader_id
                                 if self.nodes[leader.leader_id].is_broker
                                 else md.controller_id in want)
                if racks != want or not controller_ok:
                    return (f"node {b.node_id} lists brokers {racks}, controller "
                            f"{md.controller_id}; leader {leader.leader_id}")
            return leader

        return self.wait_until("the cluster formed", formed, timeout)

    def logs(self, n: int = 6000) -> str:
        return "\n".join(f"----- node {i} ({node.roles}) log tail: {node.log_path}\n"
                         f"{node.log_tail(n)}" for i, node in self.nodes.items())
