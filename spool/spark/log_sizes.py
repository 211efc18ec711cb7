"""Bytes per offset of each partition, as the driver can learn it cheaply: ``maxBytesPerTrigger``.

``bytes_per_offset(opts, cluster, marks)`` asks each partition's leader (one
DescribeLogDirs v2 request per leader broker, all at once) for the size of
the partition's log, and divides it by the offsets the log spans:

    bytes per offset = partition_size / (end - log start)

with ``(log start, end)`` the watermarks the source already has (the end is
the LSO under read_committed). ``partition_size`` is the bytes of the
partition's segment files on the leader (Kafka's ``Log.size``), which is what
a fetch of the whole log sends: record batches as stored, so compressed
topics count compressed bytes, and batch headers and per-record framing are
included. It is an average over the whole log: a partition whose record
sizes changed recently is estimated from its history, and compaction (offset
gaps) lowers bytes per offset, never the cap's meaning in bytes. A partition
with no records has no estimate (nothing to admit there).

Cost: one metadata request and one DescribeLogDirs per leader per trigger,
made only when ``maxBytesPerTrigger`` is set. DescribeLogDirs needs DESCRIBE
on the cluster (Kafka's ACL) and is secured as the executors' fetches are
(``connection.client_security``: the ``kafka.security.protocol``, ``kafka.sasl.*``,
``kafka.ssl.*`` options); when the question cannot be asked or is refused,
``SizeUnavailable`` says why and which option to drop, rather than silently
admitting unbounded batches.
"""

from __future__ import annotations

from collections import defaultdict

from spool.net.client import AuthenticationError
from spool.protocol._generated import DescribeLogDirsRequest
from spool.protocol._generated.describe_log_dirs_request import DescribableLogDirTopic
from spool.protocol.errors import error_name
from spool.security.client_config import ClientSecurity
from spool.spark.connection import Connection, client_security
from spool.spark.options import SpoolOptions

TP = tuple[str, int]
VERSION = 2  # flexible; served by Kafka 2.4+ (Kafka 4 serves 1-4) and Spool (1-5)
TIMEOUT_MS = 30_000


class SizeUnavailable(RuntimeError):
    """The partition sizes cannot be learned; the message names the cause and the option."""


def _security(opts: SpoolOptions) -> ClientSecurity:
    try:
        return client_security(opts.client_conf)
    except (ValueError, OSError) as exc:
        raise SizeUnavailable(
            f"maxBytesPerTrigger asks the brokers for partition sizes (DescribeLogDirs) with the "
            f"kafka.security.* / kafka.sasl.* / kafka.ssl.* options: {exc}; drop "
            "maxBytesPerTrigger or fix the option") from None


def _request(tps: list[TP]) -> DescribeLogDirsRequest:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for t, p in tps:
        by_topic[t].append(p)
    return DescribeLogDirsRequest(topics=[
        DescribableLogDirTopic(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())
    ])


def _sizes(conn: Connection) -> dict[TP, int]:
    resp = conn.receive()
    if resp.error_code:
        raise SizeUnavailable(
            f"DescribeLogDirs to {conn.host}:{conn.port} failed with "
            f"{error_name(resp.error_code)} (maxBytesPerTrigger needs DESCRIBE on the cluster); "
            "drop maxBytesPerTrigger or grant it")
    sizes: dict[TP, int] = {}
    for result in resp.results:
        for topic in result.topics:
            for part in topic.partitions:
                if not part.is_future_key:
                    sizes[(topic.name, part.partition_index)] = part.partition_size
    return sizes


def _ask_all(jobs: list[tuple[str, int, list[TP]]], security: ClientSecurity) -> dict[TP, int]:
    """One DescribeLogDirs per leader, all sent before any answer is read."""
    conns = [Connection(h, p, security, timeout=TIMEOUT_MS / 1000,
                        connect_timeout=TIMEOUT_MS / 1000, client_id="spool-spark-sizes")
             for h, p, _ in jobs]
    try:
        for conn, (_, _, tps) in zip(conns, jobs, strict=True):
            conn.send(_request(tps), VERSION)
        found: dict[TP, int] = {}
        for conn in conns:
            found.update(_sizes(conn))
        return found
    finally:
        for conn in conns:
            conn.close()


def leaders(cluster, tps: list[TP]) -> dict[TP, tuple[str, int]]:
    """(host, port) of each partition's leader, from one metadata request."""
    md = cluster.consumer.list_topics(timeout=TIMEOUT_MS / 1000)
    out = {}
    for t, p in tps:
        leader = md.topics[t].partitions[p].leader if t in md.topics else -1
        broker = md.brokers.get(leader)
        if broker is None:
            raise SizeUnavailable(f"partition {t}-{p} has no leader now (maxBytesPerTrigger "
                                  "asks the leader for its size); retry later")
        out[(t, p)] = (broker.host, broker.port)
    return out


def bytes_per_offset(opts: SpoolOptions, cluster,
                     marks: dict[TP, tuple[int, int]]) -> dict[TP, float]:
    """Estimated bytes per offset of every partition in ``marks`` that has records."""
    wanted = [tp for tp, (low, high) in marks.items() if high > low]
    if not wanted:
        return {}
    by_leader: dict[tuple[str, int], list[TP]] = defaultdict(list)
    for tp, addr in leaders(cluster, wanted).items():
        by_leader[addr].append(tp)
    jobs = [(h, p, tps) for (h, p), tps in sorted(by_leader.items())]
    try:
        sizes = _ask_all(jobs, _security(opts))
    except (ConnectionError, AuthenticationError) as exc:
        raise SizeUnavailable(f"DescribeLogDirs failed: {exc}; maxBytesPerTrigger needs it") from None
    out = {}
    for tp in wanted:
        if tp not in sizes:
            raise SizeUnavailable(f"the leader of {tp[0]}-{tp[1]} did not report its size "
                                  "(leadership moved?); retry later")
        low, high = marks[tp]
        out[tp] = sizes[tp] / (high - low)
    return out
