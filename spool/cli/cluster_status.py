"""``spool cluster status``: the quorum and the brokers, as one broker reports them.

``fetch_status(bootstrap, timeout)`` asks the nodes of ``bootstrap``
(``host:port,...``) in turn until one can tell (a controller listener that is
not the quorum leader cannot): ApiVersions (to choose versions both
sides speak), DescribeQuorum on ``__cluster_metadata-0`` (a broker forwards
it to the active controller, as Kafka does) and DescribeCluster (v2 with
``include_fenced_brokers`` when the node serves it, so fenced brokers show;
before v2 only unfenced brokers are listed). Asked on a controller listener
(``-b`` at a CONTROLLER port), it shows the quorum only: controllers serve
no DescribeCluster for brokers. ``Status`` holds what
``kafka-metadata-quorum describe --status --replication`` and
``kafka-cluster`` show: leader, epoch, high watermark, each voter's log end
offset, lag behind the leader and how long ago it last fetched and was caught
up; each broker's id, address, rack and whether it is fenced.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field

from spool.cli.wire import node_client_options
from spool.net.client import ClientError, NodeClient
from spool.protocol._generated import (
    ApiVersionsRequest,
    DescribeClusterRequest,
    DescribeQuorumRequest,
)
from spool.protocol._generated.describe_quorum_request import PartitionData, TopicData
from spool.protocol.errors import Errors, error_name

METADATA_TOPIC = "__cluster_metadata"
_OURS = {18: 3, 55: 2, 60: 2}  # api key -> the highest version this command speaks


class StatusError(Exception):
    """No status could be had; the message says from whom and why."""


@dataclass
class Replica:
    node_id: int
    log_end_offset: int
    lag: int
    last_fetch_ms_ago: int | None
    last_caught_up_ms_ago: int | None
    status: str  # Leader, Follower, Observer


@dataclass
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool | None  # None: the node does not say (DescribeCluster < v2)


@dataclass
class Status:
    asked: str
    cluster_id: str | None  # None: asked a controller listener (no DescribeCluster there)
    controller_id: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    replicas: list[Replica] = field(default_factory=list)
    brokers: list[Broker] | None = field(default_factory=list)  # None: not asked (as above)

    def to_json(self) -> dict:
        return asdict(self)


def fetch_status(bootstrap: str, timeout: float) -> Status:
    return asyncio.run(_fetch(bootstrap, timeout))


async def _fetch(bootstrap: str, timeout: float) -> Status:
    errors = []
    for item in filter(None, (s.strip() for s in bootstrap.split(","))):
        host, _, port = item.rpartition(":")
        if not port.isdigit():
            raise StatusError(f"{item!r} is not host:port")
        client = NodeClient(host.strip("[]"), int(port), client_id="spool-cluster-status",
                            request_timeout_ms=int(timeout * 1000),
                            connect_timeout_ms=int(timeout * 1000),
                            **node_client_options())
        try:
            return await _ask(client, item)
        except (ClientError, StatusError) as e:  # (a controller that is not the leader...)
            errors.append(str(e))
        finally:
            await client.close()
    raise StatusError("no node answered: " + "; ".join(errors))


async def _ask(client: NodeClient, asked: str) -> Status:
    versions = await client.request(ApiVersionsRequest(
        client_software_name="spool", client_software_version="cluster-status"), 3)
    served = {k.api_key: k.max_version for k in versions.api_keys}
    if 55 not in served:
        raise StatusError(f"{asked} does not serve DescribeQuorum (a single node has no quorum)")
    use = {key: min(ours, served.get(key, ours)) for key, ours in _OURS.items()}
    quorum = await client.request(DescribeQuorumRequest(topics=[TopicData(
        topic_name=METADATA_TOPIC, partitions=[PartitionData(partition_index=0)])]), use[55])
    if quorum.error_code:
        raise StatusError(f"{asked}: DescribeQuorum: {_error(quorum.error_code, quorum)}"
                          + _hint(quorum.error_code))
    p = quorum.topics[0].partitions[0]
    if p.error_code:
        raise StatusError(f"{asked}: DescribeQuorum: {_error(p.error_code, p)}"
                          + _hint(p.error_code))
    cluster = None  # a controller listener serves no DescribeCluster for brokers
    if 60 in served:
        cluster = await client.request(
            DescribeClusterRequest(include_fenced_brokers=True), use[60])
        if cluster.error_code:
            raise StatusError(f"{asked}: DescribeCluster: {_error(cluster.error_code, cluster)}")
    now = int(time.time() * 1000)
    leo = {r.replica_id: r.log_end_offset for r in p.current_voters}
    leader_leo = leo.get(p.leader_id, p.high_watermark)

    def replica(r, observer: bool) -> Replica:
        status = "Observer" if observer else "Leader" if r.replica_id == p.leader_id else "Follower"
        return Replica(r.replica_id, r.log_end_offset, max(0, leader_leo - r.log_end_offset),
                       _ago(now, r.last_fetch_timestamp), _ago(now, r.last_caught_up_timestamp),
                       status)

    return Status(
        asked=asked, cluster_id=cluster.cluster_id if cluster else None,
        controller_id=cluster.controller_id if cluster else p.leader_id,
        leader_id=p.leader_id, leader_epoch=p.leader_epoch, high_watermark=p.high_watermark,
        replicas=[replica(r, False) for r in p.current_voters]
        + [replica(r, True) for r in p.observers],
        brokers=None if cluster is None else sorted(
            (Broker(b.broker_id, b.host, b.port, b.rack, b.is_fenced if use[60] >= 2 else None)
             for b in cluster.brokers), key=lambda b: b.node_id),
    )


def _hint(code: int) -> str:
    """A single node answers NOT_CONTROLLER: say where its cluster view is."""
    return ("; without a quorum (a single node), spool cluster describe shows the brokers"
            if code == Errors.NOT_CONTROLLER else "")


def _ago(now: int, ts: int) -> int | None:
    return None if ts < 0 else max(0, now - ts)


def _error(code: int, body) -> str:
    message = getattr(body, "error_message", None)
    return error_name(code) + (f": {message}" if message else "")
