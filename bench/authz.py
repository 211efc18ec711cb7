"""Authorization cost: ``python -m bench.authz`` (a measurement, not a test).

What a handler pays to ask (``spool.broker.authz``), per request and per topic:

* no authorizer (``authorizer.class.name`` unset): the Produce/Fetch handlers' one
  attribute test, and ``allowed_names`` for one topic (other handlers call it anyway);
* StandardAuthorizer, the decision memoised (every check after the first for a
  principal, host, operation and resource until the ACLs change);
* StandardAuthorizer, a decision not memoised yet, over N ACLs (literal, prefixed,
  wildcard; several principals);
* rebuilding the index when the ACLs change (once per new ACL set).

Best of several rounds, in µs per call (ms for rebuilds).

``--e2e``: small Produce requests (one 1 KiB batch each, acks=1, 64 in flight on one
connection) against a broker without an authorizer and one with the StandardAuthorizer
whose principal (User:ANONYMOUS on PLAINTEXT) is allowed by a PREFIXED ACL (not a super
user: the ACL path), alternating, requests/s per run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

from spool.broker.authz import allowed, allowed_names
from spool.net.client import NodeClient
from spool.protocol._generated import CreateAclsRequest, CreateTopicsRequest, ProduceRequest
from spool.protocol._generated.create_acls_request import AclCreation
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.acl import AclOperation, ResourceType
from spool.security.acls import AclBinding, AclPermissionType, PatternType
from spool.security.authorizer import StandardAuthorizer
from spool.security.image import SecurityImage, acl_record
from spool.security.principal import user
from tests.helpers.broker_proc import BrokerProcess

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def acls(n: int) -> list[AclBinding]:
    """``n`` ACLs: a third literal topics, a third prefixed, the rest groups; 50 users."""
    out = []
    for i in range(n):
        pattern = PatternType.PREFIXED if i % 3 == 1 else PatternType.LITERAL
        rtype = ResourceType.GROUP if i % 3 == 2 else ResourceType.TOPIC
        out.append(AclBinding(rtype, f"team{i % 97}-svc{i}", pattern, f"User:u{i % 50}", "*",
                              AclOperation.WRITE if i % 2 else AclOperation.READ,
                              AclPermissionType.ALLOW))
    out.append(AclBinding(ResourceType.TOPIC, "*", PatternType.LITERAL, "User:u1", "*",
                          AclOperation.DESCRIBE, AclPermissionType.ALLOW))
    return out


def image(n: int) -> SecurityImage:
    return SecurityImage().replay(acl_record(uuid.uuid4(), b) for b in acls(n))


def ctx(authorizer, img) -> SimpleNamespace:
    broker = SimpleNamespace(authorizer=authorizer, security_image=img)
    conn = SimpleNamespace(principal=user("u1"), host="10.0.0.1")
    return SimpleNamespace(broker=broker, conn=conn)


def best_us(fn, calls: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


async def _setup(bootstrap: str, acl: bool) -> None:
    host, port = bootstrap.split(":")
    c = NodeClient(host, int(port))
    try:
        await c.request(CreateTopicsRequest(timeout_ms=10000, validate_only=False, topics=[
            CreatableTopic(name="bench-authz", num_partitions=1, replication_factor=1,
                           assignments=[], configs=[])]), 5)
        if acl:
            resp = await c.request(CreateAclsRequest(creations=[AclCreation(
                resource_type=int(ResourceType.TOPIC), resource_name="bench",
                resource_pattern_type=int(PatternType.PREFIXED), principal="User:ANONYMOUS",
                host="*", operation=int(AclOperation.ALL),
                permission_type=int(AclPermissionType.ALLOW))]), 3)
            assert resp.results[0].error_code == 0, resp
    finally:
        await c.close()


async def _produce_rate(bootstrap: str, requests: int, in_flight: int = 64) -> float:
    from spool.records.builder import BatchBuilder

    b = BatchBuilder()
    b.append(b"k", b"v" * 1024, timestamp=1_700_000_000_000)
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        TopicProduceData(name="bench-authz", partition_data=[
            PartitionProduceData(index=0, records=bytes(b.build()))])])
    host, port = bootstrap.split(":")
    c = NodeClient(host, int(port))
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            resp = await c.request(req, 9)
            assert resp.responses[0].partition_responses[0].error_code == 0, resp

    try:
        await c.request(req, 9)  # connect, and memoise the decision
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return requests / (time.perf_counter() - t0)
    finally:
        await c.close()


def e2e(runs: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plain = BrokerProcess(Path(tmp) / "plain").start()
        authz = BrokerProcess(Path(tmp) / "authz", {"authorizer.class.name": STANDARD,
                                                     "super.users": "User:ANONYMOUS"}).start()
        try:
            asyncio.run(_setup(plain.bootstrap, False))
            asyncio.run(_setup(authz.bootstrap, True))
            authz.overrides.pop("super.users")  # the ACL decides from now on
            authz.restart()
            rates: dict[str, list[float]] = {"no authorizer": [], "StandardAuthorizer": []}
            for _ in range(runs):
                rates["no authorizer"].append(asyncio.run(_produce_rate(plain.bootstrap,
                                                                        requests)))
                rates["StandardAuthorizer"].append(asyncio.run(_produce_rate(authz.bootstrap,
                                                                             requests)))
        finally:
            plain.stop()
            authz.stop()
    print(f"\n| Produce requests/s ({requests:,} x 1 KiB, acks=1, 64 in flight) | runs |"
          "\n|---|---|")
    for label, r in rates.items():
        print(f"| {label} | {', '.join(f'{x:,.0f}' for x in r)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--e2e", action="store_true")
    ap.add_argument("--requests", type=int, default=10_000)
    args = ap.parse_args()
    if args.e2e:
        e2e(args.rounds, args.requests)
        return
    rows = []
    topic = ["team1-svc1"]
    off = ctx(None, SecurityImage())
    rows.append(("Produce/Fetch without an authorizer: `broker.authorizer is not None`",
                 best_us(lambda: off.broker.authorizer is not None, args.calls, args.rounds)))
    rows.append(("allowed_names, 1 topic, no authorizer",
                 best_us(lambda: allowed_names(off, AclOperation.WRITE, ResourceType.TOPIC,
                                               topic), args.calls, args.rounds)))
    for n in (100, 10_000):
        img = image(n)
        on = ctx(StandardAuthorizer(), img)
        allowed(on, AclOperation.WRITE, ResourceType.TOPIC, topic[0])  # memoise
        rows.append((f"allowed_names, 1 topic, {n:,} ACLs, memoised",
                     best_us(lambda on=on: allowed_names(on, AclOperation.WRITE,
                                                         ResourceType.TOPIC, topic),
                             args.calls, args.rounds)))
        names = [f"team{i % 97}-svc{i}x" for i in range(args.calls // 10)]

        def cold(on=on, img=img, names=names):
            a = StandardAuthorizer()
            for name in names:
                a.authorize(img, "User:u1", "10.0.0.1", AclOperation.WRITE,
                            ResourceType.TOPIC, name)

        rows.append((f"authorize, {n:,} ACLs, not memoised",
                     best_us(cold, 1, args.rounds) / len(names)))
        rebuild_ms = best_us(lambda img=img: StandardAuthorizer()._current(img), 1,
                             args.rounds) / 1000
        rows.append((f"index rebuild, {n:,} ACLs (ms)", rebuild_ms))
    print("| case | µs per call (ms for rebuilds) |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value:.2f} |")


if __name__ == "__main__":
    main()
