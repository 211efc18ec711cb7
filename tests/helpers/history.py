"""Histories of what clients did, and the checkers that decide whether faults lost any of it:
metadata operations (``History``, ``check``) and produced records (``RecordHistory``,
``check_records``, at the end of this module).

``History`` records each operation a client made (``create_topic``,
``delete_topic``, ``alter_config``), in the order they were issued, with its
outcome once known:

* ``ok``: acknowledged without error; its effect must be visible everywhere.
* ``rejected``: refused by validation (INVALID_*, POLICY_VIOLATION): it had
  no effect.
* ``unknown``: anything else (a timeout, NOT_CONTROLLER, a closed
  connection, TOPIC_ALREADY_EXISTS from a client's own retry): it may or may
  not have taken effect.

Operations on one subject (a topic, or a topic's config key) are issued one
at a time; an ``unknown`` one is taken to have happened before the next
operation on the same subject or not at all. The wrappers here issue and
record in one step: ``create_topic_admin``/``alter_config_admin`` through
confluent-kafka's AdminClient (a real client, any broker), ``create_topic_raw``
through our codec to one chosen node (to ask a partitioned node directly).
``observe`` records the brokers (id, rack, endpoint) a view showed: broker
registrations the cluster acknowledged.

``node_view(node, bootstrap, history)`` asks one node, and only it, what it
knows: Metadata v12 (brokers with racks, controller id, topics with ids and
partition counts) and DescribeConfigs for every topic config the history
touched. ``check(history, views, expected_brokers)`` returns the violations
(an empty list means the history holds):

* each topic's state on each node (absent, or present with n partitions)
  is one that the operations on it allow, computed by replaying them
  (``ok`` forces its effect; ``unknown`` adds it as a possibility);
* a non-internal topic no operation created is a violation (it came out of
  nowhere), as is one with another partition count than requested;
* every node gives a topic the same topic id, and shows the same controller;
* each touched config key's value (None when not overridden) is allowed;
* every broker the history observed, and every expected one, is listed by
  every node with the same rack and endpoint; no other broker is listed.

``wait_converged(collect, check_fn, timeout)`` re-collects until the check
passes or ``timeout`` ends (a fault may leave nodes catching up for a
while); it returns the last violations. A lost topic never comes back, so
waiting hides nothing that matters.

Records (the replication failover tests' judge, Jepsen-style): ``RecordHistory``
holds every produce attempt of every writer, one record each, named by
(writer, seq) (``record_value(writer, seq)`` starts its value; seq is the
writer's send order), with its outcome once known: ``acked`` (with the
partition and offset the broker acknowledged), ``failed`` (definitely not
written: a refusal before the append) or ``unknown`` (anything else; a
client that retries by itself, as confluent-kafka's does, only ever gives
``unknown`` for an error: ``confluent_callback``). A ``Read`` is what one
source found: a consumer, or one replica's segment files read offline, in
log order, with the offset each partition was read up to.
``check_records(history, read)`` reports, for that read: ``lost`` (acked, not
there), ``duplicated`` (one attempt there twice), ``reordered`` (two acked
attempts of one writer with one key in one partition, in the other order
than sent), ``misplaced`` (acked at one offset, found at another) and
``unexpected`` (no attempt made it, or a failed attempt is there).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from spool.protocol._generated import (
    CreateTopicsRequest,
    DescribeConfigsRequest,
    MetadataRequest,
)
from spool.protocol._generated.create_topics_request import CreatableTopic, CreatableTopicConfig
from spool.protocol._generated.describe_configs_request import DescribeConfigsResource
from spool.protocol.errors import error_name
from tests.helpers.raw_client import RawClient

OK, REJECTED, UNKNOWN = "ok", "rejected", "unknown"
# Validation errors: the request was refused as a whole, nothing was written.
DEFINITE_REJECTIONS = frozenset({
    "INVALID_TOPIC_EXCEPTION", "INVALID_PARTITIONS", "INVALID_REPLICATION_FACTOR",
    "INVALID_REPLICA_ASSIGNMENT", "INVALID_CONFIG", "POLICY_VIOLATION", "INVALID_REQUEST",
    "UNKNOWN_TOPIC_OR_PARTITION",
})
TOPIC_CONFIG_SOURCE = 1  # DYNAMIC_TOPIC_CONFIG: a per-topic override
ABSENT = None


@dataclasses.dataclass
class Op:
    index: int
    kind: str  # create_topic | delete_topic | alter_config
    topic: str
    partitions: int | None = None
    key: str | None = None
    value: str | None = None  # alter_config: None deletes the override
    configs: dict[str, str] = dataclasses.field(default_factory=dict)  # create_topic's
    node: int | None = None  # the node it was sent to, when one was chosen
    outcome: str | None = None
    error: str = ""
    started: float = 0.0
    finished: float = 0.0

    def __str__(self) -> str:
        what = (f"{self.kind}({self.topic}, partitions={self.partitions})"
                if self.kind == "create_topic" else
                f"{self.kind}({self.topic}, {self.key}={self.value!r})"
                if self.kind == "alter_config" else f"{self.kind}({self.topic})")
        where = f" via node {self.node}" if self.node is not None else ""
        return f"#{self.index} {what}{where} -> {self.outcome}{': ' + self.error if self.error else ''}"


def classify(error_name_: str | None) -> str:
    if not error_name_ or error_name_ == "NONE":
        return OK
    return REJECTED if error_name_ in DEFINITE_REJECTIONS else UNKNOWN


class History:
    """The operations issued so far (thread-safe) and the brokers seen registered."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.brokers_seen: dict[int, tuple[str | None, str]] = {}  # id -> (rack, host:port)
        self._lock = threading.Lock()

    def begin(self, kind: str, topic: str, **fields: Any) -> Op:
        with self._lock:
            op = Op(len(self.ops), kind, topic, started=time.monotonic(), **fields)
            self.ops.append(op)
            return op

    def end(self, op: Op, outcome: str, error: str = "") -> Op:
        op.outcome, op.error, op.finished = outcome, error, time.monotonic()
        return op

    def acked(self, kind: str | None = None) -> list[Op]:
        return [o for o in self.ops if o.outcome == OK and (kind is None or o.kind == kind)]

    def observe(self, view: NodeView) -> None:
        with self._lock:
            for b, (rack, endpoint) in view.brokers.items():
                self.brokers_seen.setdefault(b, (rack, endpoint))

    # --- issuing operations -------------------------------------------------------------

    def create_topic_admin(self, admin, name: str, partitions: int = 1,
                           replication_factor: int = 1, configs: dict[str, str] | None = None,
                           timeout: float = 10.0) -> Op:
        """CreateTopics through a confluent-kafka AdminClient; waits for its answer."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic

        op = self.begin("create_topic", name, partitions=partitions, configs=dict(configs or {}))
        fut = admin.create_topics(
            [NewTopic(name, partitions, replication_factor, config=dict(configs or {}))],
            request_timeout=timeout, operation_timeout=timeout)[name]
        try:
            fut.result(timeout=timeout + 5)
        except KafkaException as e:
            err = e.args[0]
            return self.end(op, classify(err.name()), f"{err.name()}: {err.str()}")
        except Exception as e:  # a client-side timeout of the future
            return self.end(op, UNKNOWN, f"{type(e).__name__}: {e}")
        return self.end(op, OK)

    def alter_config_admin(self, admin, topic: str, key: str, value: str | None,
                           timeout: float = 10.0) -> Op:
        """IncrementalAlterConfigs (SET, or DELETE when ``value`` is None) of one topic key."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        op = self.begin("alter_config", topic, key=key, value=value)
        entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET
                            if value is not None else AlterConfigOpType.DELETE)
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        fut = admin.incremental_alter_configs([res], request_timeout=timeout)[res]
        try:
            fut.result(timeout=timeout + 5)
        except KafkaException as e:
            err = e.args[0]
            return self.end(op, classify(err.name()), f"{err.name()}: {err.str()}")
        except Exception as e:
            return self.end(op, UNKNOWN, f"{type(e).__name__}: {e}")
        return self.end(op, OK)

    def create_topic_raw(self, node: int, bootstrap: str, name: str, partitions: int = 1,
                         replication_factor: int = 1, configs: dict[str, str] | None = None,
                         timeout: float = 10.0) -> Op:
        """CreateTopics v7 to exactly one node (``bootstrap``), with ``timeout`` as both the
        request's timeout_ms and the socket's (plus 5 s)."""
        op = self.begin("create_topic", name, partitions=partitions, node=node,
                        configs=dict(configs or {}))
        req = CreateTopicsRequest(timeout_ms=int(timeout * 1000), topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor,
            assignments=[], configs=[CreatableTopicConfig(name=k, value=v)
                                     for k, v in (configs or {}).items()])])
        try:
            c = RawClient(bootstrap, timeout=timeout + 5)
            try:
                resp = c.request(19, 7, req)
            finally:
                c.close()
        except (OSError, ConnectionError) as e:
            return self.end(op, UNKNOWN, f"{type(e).__name__}: {e}")
        t = resp.topics[0]
        name_ = error_name(t.error_code)
        return self.end(op, classify(name_),
                        "" if t.error_code == 0 else f"{name_}: {t.error_message}")


@dataclasses.dataclass
class NodeView:
    """What one node answered (``error`` set when it could not be asked)."""

    node: int
    brokers: dict[int, tuple[str | None, str]] = dataclasses.field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    topics: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)  # (id, parts)
    configs: dict[str, dict[str, str | None]] = dataclasses.field(default_factory=dict)
    error: str = ""


def node_view(node: int, bootstrap: str, history: History | None = None,
              timeout: float = 10.0) -> NodeView:
    view = NodeView(node)
    try:
        c = RawClient(bootstrap, timeout=timeout)
        try:
            md = c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
            view.controller_id, view.cluster_id = md.controller_id, md.cluster_id
            view.brokers = {b.node_id: (b.rack, f"{b.host}:{b.port}") for b in md.brokers}
            for t in md.topics:
                if t.error_code == 0 and not t.is_internal and not (t.name or "").startswith("__"):
                    view.topics[t.name] = (str(t.topic_id), len(t.partitions))
            keys: dict[str, set[str]] = {}
            for op in history.ops if history else []:
                if op.kind == "alter_config" and op.topic in view.topics:
                    keys.setdefault(op.topic, set()).add(op.key)
            if keys:
                dc = c.request(32, 4, DescribeConfigsRequest(resources=[
                    DescribeConfigsResource(resource_type=2, resource_name=t,
                                            configuration_keys=sorted(ks))
                    for t, ks in sorted(keys.items())]))
                for r in dc.results:
                    if r.error_code != 0:
                        view.error += f"DescribeConfigs {r.resource_name}: " \
                                      f"{error_name(r.error_code)}; "
                        continue
                    got = {e.name: (e.value if e.config_source == TOPIC_CONFIG_SOURCE else None)
                           for e in r.configs}
                    view.configs[r.resource_name] = {k: got.get(k) for k in keys[r.resource_name]}
        finally:
            c.close()
    except (OSError, ConnectionError) as e:
        view.error = f"node {node} at {bootstrap}: {type(e).__name__}: {e}"
    return view


def _possible(ops: list[Op], start: Any, effect: Callable[[Op], Any | None]) -> set[Any]:
    """The states a subject may be in after ``ops`` (see the module doc)."""
    states = {start}
    for op in ops:
        new = effect(op)
        if op.outcome == OK:
            states = {new}
        elif op.outcome == UNKNOWN or op.outcome is None:
            states = states | {new}
    return states


def _topic_effect(op: Op) -> Any:
    return op.partitions if op.kind == "create_topic" else ABSENT


def check(history: History, views: list[NodeView],
          expected_brokers: dict[int, str | None] | None = None) -> list[str]:
    bad: list[str] = []
    for v in views:
        if v.error:
            bad.append(f"node {v.node} could not be read: {v.error}")
    views = [v for v in views if not v.error]
    if not views:
        return bad
    by_topic: dict[str, list[Op]] = {}
    by_key: dict[tuple[str, str], list[Op]] = {}
    for op in history.ops:
        if op.kind in ("create_topic", "delete_topic"):
            by_topic.setdefault(op.topic, []).append(op)
        elif op.kind == "alter_config":
            by_key.setdefault((op.topic, op.key), []).append(op)
    for topic, ops in by_topic.items():
        allowed = _possible(ops, ABSENT, _topic_effect)
        for v in views:
            got = v.topics[topic][1] if topic in v.topics else ABSENT
            if got not in allowed:
                shown = "absent" if got is ABSENT else f"present with {got} partitions"
                want = sorted("absent" if a is ABSENT else f"{a} partitions" for a in allowed)
                bad.append(f"topic {topic}: node {v.node} shows it {shown}; the history allows "
                           f"{want} after " + "; ".join(str(o) for o in ops))
    for v in views:
        for topic in v.topics:
            if topic not in by_topic:
                bad.append(f"topic {topic}: node {v.node} lists it but no operation created it")
    ids: dict[str, dict[str, list[int]]] = {}
    for v in views:
        for topic, (tid, _) in v.topics.items():
            ids.setdefault(topic, {}).setdefault(tid, []).append(v.node)
    for topic, by_id in ids.items():
        if len(by_id) > 1:
            bad.append(f"topic {topic}: nodes disagree on its topic id: {by_id}")
    for (topic, key), ops in by_key.items():
        allowed = _possible(ops, None, lambda o: o.value)
        for v in views:
            if topic not in v.topics:
                continue
            got = v.configs.get(topic, {}).get(key, "<not described>")
            if got not in allowed:
                bad.append(f"config {topic} {key}: node {v.node} shows {got!r}; the history "
                           f"allows {sorted(map(repr, allowed))} after "
                           + "; ".join(str(o) for o in ops))
    controllers = {v.node: v.controller_id for v in views}
    if len(set(controllers.values())) != 1 or -1 in controllers.values():
        bad.append(f"nodes disagree on the controller (node: controller id): {controllers}")
    expected: dict[int, tuple[str | None, str | None]] = {
        b: (rack, None) for b, rack in (expected_brokers or {}).items()}
    for b, (rack, endpoint) in history.brokers_seen.items():
        if b in expected and expected[b][0] != rack:
            bad.append(f"broker {b}: seen registered with rack {rack}, expected {expected[b][0]}")
        expected[b] = (expected.get(b, (rack, None))[0], endpoint)
    for v in views:
        for b, (rack, endpoint) in expected.items():
            if b not in v.brokers:
                bad.append(f"broker {b}: registered (rack {rack}) but node {v.node} does not "
                           f"list it")
            elif v.brokers[b][0] != rack or (endpoint and v.brokers[b][1] != endpoint):
                bad.append(f"broker {b}: node {v.node} lists rack {v.brokers[b][0]} at "
                           f"{v.brokers[b][1]}; registered with rack {rack} at {endpoint}")
        for b in set(v.brokers) - set(expected):
            bad.append(f"broker {b}: node {v.node} lists it but it never registered "
                       f"({v.brokers[b]})")
    return bad


def wait_converged(collect: Callable[[], list[NodeView]],
                   check_fn: Callable[[list[NodeView]], list[str]],
                   timeout: float = 30.0, every: float = 0.5) -> list[str]:
    """Re-collect views until ``check_fn`` finds nothing or ``timeout`` passes; the last
    violations (empty when converged)."""
    deadline = time.monotonic() + timeout
    while True:
        bad = check_fn(collect())
        if not bad or time.monotonic() > deadline:
            return bad
        time.sleep(every)


# ====================================================================================
# Records: produce attempts and consumed records (the replication failover tests' judge)
# ====================================================================================

ACKED, FAILED = "acked", "failed"  # (UNKNOWN as above)


def record_value(writer: int, seq: int, pad: int = 0) -> bytes:
    """The value of attempt ``seq`` of ``writer``: names it (``w{writer}-{seq}``), padded with
    ``pad`` bytes of ``.`` after a ``|`` (for a record size)."""
    v = f"w{writer}-{seq}".encode()
    return v + b"|" + b"." * pad if pad else v


def parse_record_value(value: bytes | None) -> tuple[int, int] | None:
    """(writer, seq) of a value made by ``record_value``; None for anything else."""
    if not value or not value.startswith(b"w"):
        return None
    head = value.split(b"|", 1)[0]
    try:
        w, s = head[1:].split(b"-", 1)
        return int(w), int(s)
    except ValueError:
        return None


@dataclasses.dataclass
class Attempt:
    """One produce attempt (one record) and its outcome, once known.

    ``outcome``: ``acked`` (the broker acknowledged it at ``offset`` of ``partition``;
    offset -1 when the client did not say), ``failed`` (definitely not written: a refusal
    before the append, such as NOT_ENOUGH_REPLICAS), ``unknown`` (anything else: a timeout,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, a lost connection: it may or may not be in the log),
    None while in flight (as unknown)."""

    writer: int
    seq: int
    topic: str
    key: bytes | None
    partition: int | None = None  # the one asked for, then the one the client reports
    outcome: str | None = None
    offset: int = -1
    error: str = ""
    sent: float = 0.0
    done: float = 0.0

    @property
    def id(self) -> tuple[int, int]:
        return self.writer, self.seq

    def __str__(self) -> str:
        at = f"{self.topic}-{self.partition}@{self.offset}" if self.partition is not None \
            else self.topic
        return (f"w{self.writer}-{self.seq} key={self.key!r} {at} -> {self.outcome}"
                f"{': ' + self.error if self.error else ''}")


@dataclasses.dataclass(frozen=True)
class Consumed:
    """A record found in a log (a consumer's read, or a replica's files read offline)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclasses.dataclass
class Read:
    """Everything ``source`` (``"consumer"``, ``"replica 2"``...) found of some partitions:
    ``records`` in log order, and for each partition read the offset the read went up to
    (exclusive: its high watermark)."""

    source: str
    records: list[Consumed] = dataclasses.field(default_factory=list)
    ends: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)


class RecordHistory:
    """Produce attempts, in the order issued (thread-safe; see ``check_records``)."""

    def __init__(self) -> None:
        self.attempts: dict[tuple[int, int], Attempt] = {}
        self._lock = threading.Lock()
        self._next: dict[int, int] = {}

    def begin(self, writer: int, topic: str, key: bytes | None,
              partition: int | None = None) -> Attempt:
        """A new attempt of ``writer`` (its next seq); produce it with
        ``record_value(a.writer, a.seq)`` as (the start of) its value."""
        with self._lock:
            seq = self._next.get(writer, 0)
            self._next[writer] = seq + 1
            a = Attempt(writer, seq, topic, key, partition, sent=time.monotonic())
            self.attempts[a.id] = a
            return a

    def end(self, a: Attempt, outcome: str, partition: int | None = None, offset: int = -1,
            error: str = "") -> Attempt:
        with self._lock:
            a.outcome, a.offset, a.error, a.done = outcome, offset, error, time.monotonic()
            if partition is not None:
                a.partition = partition
            return a

    def by_outcome(self, outcome: str | None) -> list[Attempt]:
        with self._lock:
            return [a for a in self.attempts.values() if a.outcome == outcome]

    def acked(self) -> list[Attempt]:
        return self.by_outcome(ACKED)

    def counts(self) -> dict[str, int]:
        with self._lock:
            out: dict[str, int] = {}
            for a in self.attempts.values():
                k = a.outcome or "in flight"
                out[k] = out.get(k, 0) + 1
            return out

    def confluent_callback(self, a: Attempt) -> Callable[[Any, Any], None]:
        """An ``on_delivery`` for confluent-kafka's ``Producer.produce`` that ends ``a``:
        acked with the reported partition and offset; an error ends it ``unknown`` (the
        client retried it: any try may have been written)."""

        def done(err, msg) -> None:
            if err is None:
                self.end(a, ACKED, msg.partition(), msg.offset())
            else:
                self.end(a, UNKNOWN, msg.partition() if msg is not None else None,
                         error=f"{err.name()}: {err.str()}")

        return done


@dataclasses.dataclass
class RecordReport:
    """What ``check_records`` found; each list holds one line per violation."""

    lost: list[str] = dataclasses.field(default_factory=list)
    duplicated: list[str] = dataclasses.field(default_factory=list)
    reordered: list[str] = dataclasses.field(default_factory=list)
    misplaced: list[str] = dataclasses.field(default_factory=list)
    unexpected: list[str] = dataclasses.field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        return self.lost + self.duplicated + self.reordered + self.misplaced + self.unexpected

    def __bool__(self) -> bool:
        return bool(self.violations)

    def summary(self, limit: int = 20) -> str:
        v = self.violations
        head = (f"lost {len(self.lost)}, duplicated {len(self.duplicated)}, reordered "
                f"{len(self.reordered)}, misplaced {len(self.misplaced)}, unexpected "
                f"{len(self.unexpected)}")
        return head + "".join(f"\n  {x}" for x in v[:limit]) + (
            f"\n  ... {len(v) - limit} more" if len(v) > limit else "")


def check_records(history: RecordHistory, read: Read,
                  topics: set[str] | None = None) -> RecordReport:
    """Judge one ``read`` against the history (``topics``: only these; default all the
    history wrote to):

    * lost: an acked attempt whose partition was read and that is not in it;
    * duplicated: one attempt (writer, seq) found more than once (acked or not: an
      idempotent producer never writes a record twice);
    * reordered: two acked attempts of one writer with the same key in one partition found
      in the other order than they were sent (a writer's seq is its send order);
    * misplaced: an acked attempt found at another partition or offset than acknowledged;
    * unexpected: a record no attempt made, or a ``failed`` attempt that is in the log.
    """
    rep = RecordReport()
    want_topics = topics if topics is not None else {a.topic for a in history.attempts.values()}
    found: dict[tuple[int, int], list[Consumed]] = {}
    for r in read.records:
        if r.topic not in want_topics:
            continue
        ident = parse_record_value(r.value)
        a = history.attempts.get(ident) if ident is not None else None
        if a is None or a.topic != r.topic:
            rep.unexpected.append(f"{read.source}: {r.topic}-{r.partition}@{r.offset} "
                                  f"key={r.key!r} value={(r.value or b'')[:40]!r}: no attempt "
                                  f"made it")
            continue
        found.setdefault(a.id, []).append(r)
    for ident, rs in sorted(found.items()):
        a = history.attempts[ident]
        if len(rs) > 1:
            rep.duplicated.append(f"{read.source}: {a} found {len(rs)} times, at "
                                  + ", ".join(f"{r.topic}-{r.partition}@{r.offset}" for r in rs))
        if a.outcome == FAILED:
            rep.unexpected.append(f"{read.source}: {a} is in the log at "
                                  f"{rs[0].partition}@{rs[0].offset} though it failed")
        if a.outcome == ACKED and a.partition is not None:
            r = rs[0]
            if r.partition != a.partition or (a.offset >= 0 and r.offset != a.offset):
                rep.misplaced.append(f"{read.source}: {a} found at "
                                     f"{r.topic}-{r.partition}@{r.offset}")
    read_parts = {(r.topic, r.partition) for r in read.records} | set(read.ends)
    for a in sorted(history.acked(), key=lambda x: x.id):
        if a.topic not in want_topics or a.id in found:
            continue
        if a.partition is None or (a.topic, a.partition) in read_parts:
            end = read.ends.get((a.topic, a.partition)) if a.partition is not None else None
            rep.lost.append(f"{read.source}: {a} is not in the log"
                            + (f" (read up to offset {end})" if end is not None else ""))
    # Order: per (topic, partition, writer, key), acked attempts by offset must be by seq.
    chains: dict[tuple[str, int, int, bytes | None], list[tuple[int, int]]] = {}
    for ident, rs in found.items():
        a = history.attempts[ident]
        if a.outcome != ACKED:
            continue
        r = rs[0]
        chains.setdefault((r.topic, r.partition, a.writer, a.key), []).append((r.offset, a.seq))
    for (topic, p, w, key), chain in sorted(chains.items(), key=lambda kv: repr(kv[0])):
        chain.sort()
        for (o1, s1), (o2, s2) in itertools.pairwise(chain):
            if s2 < s1:
                rep.reordered.append(f"{read.source}: {topic}-{p} key={key!r}: w{w}-{s1} at "
                                     f"offset {o1} before w{w}-{s2} at offset {o2} (sent first)")
    return rep
