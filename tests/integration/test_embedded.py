"""spool.testing as a user's test suite meets it: ``running_broker`` (in a thread and in a
process), ``running_cluster`` and the pytest plugin's ``spool_broker`` / ``spool_topic``.

The sample project ``examples/testing`` runs with the plugin loaded from an installed
wheel in tests/packaging/test_wheel.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from spool.broker.config import ConfigError
from spool.testing import create_topic, running_broker, running_cluster
from tests.helpers.connect_proc import wait_until


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], **conf) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **conf})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def _consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[tuple[bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[bytes, bytes]] = []
    try:
        for _ in range(300):
            if len(got) == count:
                break
            msg = consumer.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def _refused(bootstrap: str) -> bool:
    host, _, port = bootstrap.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_running_broker_serves_with_its_config_then_stops(isolation: str, monkeypatch) -> None:
    made: list[Path] = []  # the broker's temporary directory: removed once it stopped
    mkdtemp = tempfile.mkdtemp

    def recorded(*args, **kwargs) -> str:
        made.append(Path(mkdtemp(*args, **kwargs)))
        return str(made[-1])

    monkeypatch.setattr(tempfile, "mkdtemp", recorded)
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(12)]
    with running_broker({"num.partitions": "3"}, isolation=isolation) as bootstrap:
        [tmp] = [d for d in made if d.name.startswith("spool-broker-")]
        assert (tmp / "data").is_dir()
        assert bootstrap.startswith("127.0.0.1:")
        _produce(bootstrap, "auto-created", records)  # auto-created with num.partitions
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        assert len(topics["auto-created"].partitions) == 3
        assert sorted(_consume(bootstrap, "auto-created", 3, 12)) == sorted(records)
    assert _refused(bootstrap)
    assert not tmp.exists()


def test_running_broker_refuses_an_unknown_key_in_either_isolation() -> None:
    with pytest.raises(ConfigError, match="num.partitons"), \
            running_broker({"num.partitons": "3"}):
        pass
    with pytest.raises(RuntimeError, match="exited with 2.*unknown configuration key "
                                           "'num.partitons'"), \
            running_broker({"num.partitons": "3"}, isolation="process"):
        pass


def test_running_cluster_replicates_across_its_nodes() -> None:
    with running_cluster(nodes=3) as bootstrap:
        assert len(bootstrap.split(",")) == 3
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        create_topic(bootstrap, "replicated", 2, replication_factor=3)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # CreateTopics answers once the controller committed the topic; the broker asked next
        # may apply it a moment later, as in Kafka: asked again until it has both partitions
        def both_partitions() -> list[list[int]] | None:
            found = admin.list_topics(timeout=10).topics.get("replicated")
            replicas = [] if found is None else [
                sorted(p.replicas) for p in found.partitions.values()]
            return replicas if len(replicas) == 2 else None

        replicas = wait_until(both_partitions, 10, 0.1, what="replicated's 2 partitions")
        assert replicas == [[1, 2, 3], [1, 2, 3]]
        records = [(f"k{i}".encode(), b"v") for i in range(8)]
        _produce(bootstrap, "replicated", records, acks="all")
        assert sorted(_consume(bootstrap, "replicated", 2, 8)) == sorted(records)


INNER_CONFTEST = """
import os

import pytest


@pytest.fixture(scope="session")
def spool_broker():
    return os.environ["OUTER_BOOTSTRAP"]  # the outer suite's broker, so it can look after
"""

INNER_TEST = """
import os
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource


def test_topics(spool_broker, spool_topic):
    compacted = spool_topic(partitions=2, config={"cleanup.policy": "compact"})
    plain = spool_topic()
    named = spool_topic(name="orders-" + os.environ["SUFFIX"])
    Path(os.environ["NAMES"]).write_text(f"{compacted}\\n{plain}\\n{named}\\n")
    admin = AdminClient({"bootstrap.servers": spool_broker})
    topics = admin.list_topics(timeout=10).topics
    assert [len(topics[t].partitions) for t in (compacted, plain, named)] == [2, 1, 1]
    res = ConfigResource("topic", compacted)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["cleanup.policy"].value == "compact"
"""


def test_plugin_fixtures_make_topics_and_delete_them(spool_broker, tmp_path) -> None:
    """A suite of its own (pytest in a child, the plugin by ``-p``) whose ``spool_broker``
    is this suite's: ``spool_topic`` names topics after the test, creates them with their
    partitions and configs, and deletes them when the test ends."""
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST)
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER_TEST))
    names = tmp_path / "names.txt"
    suffix = uuid.uuid4().hex[:8]
    env = {**os.environ, "OUTER_BOOTSTRAP": spool_broker, "NAMES": str(names),
           "SUFFIX": suffix, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "spool.testing.pytest_plugin", "-q",
         "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    compacted, plain, named = names.read_text().split()
    assert compacted.startswith("test_topics-") and plain.startswith("test_topics-")
    assert named == f"orders-{suffix}"
    topics = AdminClient({"bootstrap.servers": spool_broker}).list_topics(timeout=10).topics
    assert {compacted, plain, named} & set(topics) == set()


def test_spool_topic_in_this_suite(spool_broker, spool_topic) -> None:
    """The project's own suite has the plugin's fixtures beside its ``broker`` and
    ``topic_name`` (tests/conftest.py): no name is shared."""
    topic = spool_topic(partitions=4, config={"retention.ms": "60000"})
    admin = AdminClient({"bootstrap.servers": spool_broker})
    res = ConfigResource("topic", topic)
    assert admin.describe_configs([res])[res].result(10)["retention.ms"].value == "60000"
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    _produce(spool_broker, topic, records)
    assert sorted(_consume(spool_broker, topic, 4, 20)) == sorted(records)
