"""Every API at every version the broker advertises, through the real codec and handler.

A broker process of this module's own (single node: random AlterConfigs and
DeleteTopics must not reach other tests' broker) is asked ApiVersions; for
every API it lists and every version in its range, Hypothesis draws requests
from the message specs (``tools.codegen.strategies``), a few fields tamed so
that a draw does not ask the broker to wait for a day (``_tame``) and some
names pointed at a real topic, group and transactional id so handlers get past
"unknown". Each request goes over a fresh socket (``tests.helpers.raw_client``);
the response must decode at the request's version with nothing left over, every
``*error_code`` in it must be one Kafka gives that API at that version
(``spool.protocol.error_versions.allowed``; for an API not audited there, a code
Kafka has), and the connection must still answer an ApiVersions after it (Kafka
answers every request that decodes; Spool closes only on a handler crash, which
is what this finds). Produce with acks=0 gets no response; when it failed the
broker closes the connection (Kafka's way of telling such a producer), so there
either may happen (``test_produce_acks_0`` tells them apart). An API the listener does not advertise closes the connection, as
Kafka's "... which is not enabled". The controller plane (APIs of a controller
listener: the quorum's and the controller's) runs the same on a one-node combined
cluster of its own.

Examples per version: ``SPOOL_ROUNDTRIP_EXAMPLES`` (3 in CI; ``make soak`` runs
200).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.protocol._generated import (
    API_BY_KEY,
    ApiVersionsRequest,
    CreateTopicsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    MetadataRequest,
    ProduceRequest,
)
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.error_versions import allowed, error_codes
from spool.protocol.errors import BY_CODE, error_name
from spool.protocol.message import Message
from spool.records.builder import BatchBuilder
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.cluster_proc import COMBINED, Cluster
from tests.helpers.raw_client import RawClient
from tools.codegen.schema import specs_by_name
from tools.codegen.strategies import message_pairs

EXAMPLES = int(os.environ.get("SPOOL_ROUNDTRIP_EXAMPLES", "3"))
SPECS = specs_by_name()
BROKER_KEYS = sorted(k for k, e in API_BY_KEY.items() if "broker" in e.listeners)
CONTROLLER_KEYS = sorted(k for k, e in API_BY_KEY.items() if "controller" in e.listeners)
TOPIC, GROUP, TXN = "audit", "audit-group", "audit-txn"
PRODUCE, DELETE_TOPICS, API_VERSIONS = 0, 20, 18

# Fields whose random value would make the broker wait that long (legitimately).
_WAITS = {"max_wait_ms": 100, "timeout_ms": 300, "rebalance_timeout_ms": 300,
          "timeout": 300, "session_timeout_ms": 0}
# Fields whose random value would make it create that many partitions (the limit is tested
# elsewhere: keep the raw value half the time).
_COUNTS = frozenset({"num_partitions", "count", "replication_factor"})


class Target:
    """A listener to audit: its address, the names requests may point at, its log."""

    def __init__(self, bootstrap: str, plane: str, log_tail, topic_id: uuid.UUID | None = None,
                 producer_id: int = -1) -> None:
        self.bootstrap = bootstrap
        self.plane = plane
        self.log_tail = log_tail
        self.topic_id = topic_id
        self.producer_id = producer_id  # TXN's: requests that name it reach its fencing

    def advertised(self) -> dict[int, tuple[int, int]]:
        with _client(self.bootstrap) as c:
            resp = c.request(API_VERSIONS, 0, ApiVersionsRequest())
        assert resp.error_code == 0
        return {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}


@contextlib.contextmanager
def _client(bootstrap: str) -> Iterator[RawClient]:
    c = RawClient(bootstrap, timeout=20.0)
    try:
        yield c
    finally:
        c.close()


def _tame(msg: Any, rnd: random.Random, target: Target, api_key: int) -> None:
    """Bound the waits, sometimes point names at the real topic/group/transaction."""
    for name in getattr(type(msg), "__slots__", ()):
        value = getattr(msg, name)
        if isinstance(value, Message):
            _tame(value, rnd, target, api_key)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    _tame(item, rnd, target, api_key)
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int):
            if name == "producer_id" and target.producer_id >= 0 and rnd.random() < 0.5:
                setattr(msg, name, target.producer_id)
            elif name == "producer_epoch" and rnd.random() < 0.5:
                setattr(msg, name, rnd.randint(0, 3))  # mostly fenced once TXN was re-inited
            elif name in _WAITS:
                cap = _WAITS[name]
                setattr(msg, name, 6000 + abs(value) % 4000 if cap == 0 and rnd.random() < 0.5
                        else value if cap == 0 else abs(value) % cap)
            elif name in _COUNTS and rnd.random() < 0.5:
                setattr(msg, name, rnd.choice([-1, 1, 2, 3]))
            elif name in ("partition_index", "partition", "index") and rnd.random() < 0.5:
                setattr(msg, name, rnd.choice([0, 1]))
        elif isinstance(value, str) and rnd.random() < 0.5:
            topicish = name in ("topic", "topic_name") or (
                name == "name" and "Topic" in type(msg).__name__)
            if topicish and api_key != DELETE_TOPICS:
                setattr(msg, name, TOPIC)
            elif name == "group_id":
                setattr(msg, name, GROUP)
            elif name == "transactional_id":
                setattr(msg, name, TXN)
        elif name == "records" and api_key == PRODUCE and rnd.random() < 0.5:
            setattr(msg, name, _batch(rnd, target))
        elif isinstance(value, uuid.UUID) and name == "topic_id" and target.topic_id:
            if rnd.random() < 0.5 and api_key != DELETE_TOPICS:
                setattr(msg, name, target.topic_id)


def _batch(rnd: random.Random, target: Target) -> bytes:
    """A well-formed RecordBatch v2, idempotent or transactional or neither, so Produce gets
    past the CRC to the producer-state checks."""
    pid = rnd.choice([-1, target.producer_id, rnd.randint(0, 1 << 20)])
    b = BatchBuilder(compression=rnd.choice([0, 0, 1, 4]), producer_id=pid,
                     producer_epoch=-1 if pid < 0 else rnd.randint(0, 3),
                     base_sequence=-1 if pid < 0 else rnd.choice([0, 0, 1, rnd.randint(0, 99)]),
                     is_transactional=pid >= 0 and rnd.random() < 0.5)
    for i in range(rnd.randint(1, 3)):
        b.append(rnd.choice([None, b"k%d" % i]), b"v%d" % i,
                 timestamp=rnd.choice([1_700_000_000_000, -1, 0]))
    return b.build()


def _roundtrip(target: Target, api_key: int, version: int, request: Any) -> list[str]:
    """Send one request; return what is wrong with the answer (empty: nothing)."""
    entry = API_BY_KEY[api_key]
    problems: list[str] = []
    with _client(target.bootstrap) as c:
        try:
            if api_key == PRODUCE and request.acks == 0:
                c.send(api_key, version, request)  # no response: the probe is the next frame
                try:
                    c.request(API_VERSIONS, 0, ApiVersionsRequest())
                except ConnectionError:
                    pass  # a failed acks=0 produce closes the connection, as Kafka's
                return problems  # (test_produce_acks_0 checks which one closes)
            else:
                cid = c.send(api_key, version, request)
                got, resp = c.recv(api_key, version)
                if got != cid:
                    problems.append(f"correlation id {got} != {cid}")
                ok = allowed(api_key, version, target.plane)
                for code in error_codes(resp):
                    if code not in BY_CODE:
                        problems.append(f"unknown error code {code}")
                    elif ok is not None and code not in ok:
                        problems.append(f"{error_name(code)} ({code}) is not a code of "
                                        f"{entry.name} v{version}")
            probe = c.request(API_VERSIONS, 0, ApiVersionsRequest())
            if probe.error_code != 0:
                problems.append(f"probe answered {error_name(probe.error_code)}")
        except (ConnectionError, OSError) as e:
            problems.append(f"connection lost: {e!r}")
    return problems


def _audit(target: Target, api_key: int) -> None:
    advertised = target.advertised()
    entry = API_BY_KEY[api_key]
    if api_key not in advertised:
        # not served on this listener: Kafka closes the connection
        lo = entry.request.VALID_VERSIONS[0]
        with _client(target.bootstrap) as c:
            c.send(api_key, lo, entry.request())
            assert c.is_closed_by_peer(), f"{entry.name} is not advertised but was answered"
        return
    lo, hi = advertised[api_key]
    failures: list[str] = []
    for version in range(lo, hi + 1):
        try:
            _examples(target, api_key, version)
        except AssertionError as e:
            failures.append(str(e)[:3000])
    assert not failures, "\n\n".join(failures) + "\n\nbroker log:\n" + target.log_tail()


def _examples(target: Target, api_key: int, version: int) -> None:
    entry = API_BY_KEY[api_key]

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(pair=message_pairs(SPECS[entry.request.NAME], version),
           rnd=st.randoms(use_true_random=False))
    def check(pair: tuple[Any, Any], rnd: random.Random) -> None:
        request = pair[0]
        _tame(request, rnd, target, api_key)
        problems = _roundtrip(target, api_key, version, request)
        assert not problems, f"{entry.name} v{version}: {problems}\nrequest: {request!r}"

    check()


def _create_topic(bootstrap: str) -> uuid.UUID:
    with _client(bootstrap) as c:
        r = c.request(19, 4, CreateTopicsRequest(
            topics=[CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)],
            timeout_ms=10000))
        assert r.topics[0].error_code == 0, r
        md = c.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]))
    return md.topics[0].topic_id


def _no_tracebacks(log: str) -> None:
    """What a request set off in the background (not only its handler) crashed nothing."""
    assert "Traceback" not in log, log[-6000:]


def _producer_id(bootstrap: str) -> int:
    """TXN's producer id (InitProducerId once its coordinator is there)."""
    with _client(bootstrap) as c:
        for _ in range(100):
            if c.request(10, 1, FindCoordinatorRequest(key=TXN, key_type=1)).error_code == 0:
                break
            time.sleep(0.1)
        r = c.request(22, 0, InitProducerIdRequest(transactional_id=TXN,
                                                   transaction_timeout_ms=60_000))
    assert r.error_code == 0, r
    return r.producer_id


@pytest.fixture(scope="module")
def broker_target(tmp_path_factory) -> Iterator[Target]:
    b = BrokerProcess(tmp_path_factory.mktemp("roundtrip") / "data")
    b.start()
    try:
        yield Target(b.bootstrap, "broker", b.log_tail, _create_topic(b.bootstrap),
                     _producer_id(b.bootstrap))
        assert b.proc is not None and b.proc.poll() is None, "the broker died"
        _no_tracebacks(b.log_path.read_text(errors="replace"))
    finally:
        b.stop()


@pytest.fixture(scope="module")
def controller_target(tmp_path_factory) -> Iterator[Target]:
    """A one-node combined cluster: its controller listener serves the controller plane."""
    c = Cluster(tmp_path_factory.mktemp("roundtrip-kraft"), roles=(COMBINED,), proxied=False,
                log_level="WARNING")
    node = c.nodes[1]
    try:
        c.start()
        yield Target(node.controller_address, "controller", node.log_tail)
        assert node.alive, "the node died"
        _no_tracebacks(node.log_path.read_text(errors="replace"))
    finally:
        c.stop()


@pytest.mark.parametrize("api_key", BROKER_KEYS, ids=[API_BY_KEY[k].name for k in BROKER_KEYS])
def test_broker_listener(broker_target: Target, api_key: int) -> None:
    _audit(broker_target, api_key)


@pytest.mark.parametrize("api_key", CONTROLLER_KEYS,
                         ids=[API_BY_KEY[k].name for k in CONTROLLER_KEYS])
def test_controller_listener(controller_target: Target, api_key: int) -> None:
    _audit(controller_target, api_key)


def test_broker_advertises_what_its_registry_serves(broker_target: Target) -> None:
    """ApiVersions is derived from the handler registry: the audit covers every API served."""
    import spool.broker.handlers  # noqa: F401  (registers them)
    from spool.broker.registry import advertised

    assert broker_target.advertised() == {k: (lo, hi) for k, lo, hi in advertised("broker")}


def test_produce_acks_0(broker_target: Target) -> None:
    """acks=0 has no answer: a failed one closes the connection, a good one leaves it
    answering (KafkaApis.handleProduceRequest)."""
    def produce(records: bytes) -> bool:
        """Whether the connection still answers after an acks=0 produce of ``records``."""
        with _client(broker_target.bootstrap) as c:
            c.send(PRODUCE, 9, ProduceRequest(acks=0, timeout_ms=1000, topic_data=[
                TopicProduceData(name=TOPIC, partition_data=[
                    PartitionProduceData(index=0, records=records)])]))
            try:
                return c.request(API_VERSIONS, 0, ApiVersionsRequest()).error_code == 0
            except ConnectionError:
                return False

    good = BatchBuilder()
    good.append(b"k", b"v", timestamp=1_700_000_000_000)
    batch = bytearray(good.build())
    assert produce(bytes(batch))
    batch[-1] ^= 0xFF  # the CRC no longer matches: CORRUPT_MESSAGE
    assert not produce(bytes(batch))
