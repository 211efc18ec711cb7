"""A configuration the broker cannot honour is refused, loudly, before anything starts.

Real ``spool broker`` processes: a listener that asks for TLS or SASL, or whose
name maps to no security protocol, a bad value, an unknown key under
``--strict-config`` or a bad ``--log-level`` exit 2 with one exact line on
stderr and leave the data dir untouched; an unknown key without the flag is
warned about (one line naming it, with a "did you mean" hint) and ignored.
Topic configs sent by a client (CreateTopics, IncrementalAlterConfigs) get
INVALID_CONFIG with the key, the value and what is allowed (a null value in
CreateTopics too); ``segment.bytes``
has Kafka 4's 1 MiB minimum and ``internal.segment.bytes`` is the test-only
way to roll small segments, refused unless the broker was started with
``internal.segment.bytes.enable=true``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from spool.protocol._generated import CreateTopicsRequest, ProduceRequest
from spool.protocol._generated.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
)
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

BROKER = [sys.executable, "-m", "spool.cli.main", "broker"]
REFUSED_WITHIN_S = 20  # a broker that starts instead of refusing is killed after this


def refuse(tmp_path: Path, *args: str, listeners: str | None = "PLAINTEXT://127.0.0.1:0"
           ) -> tuple[int, str]:
    """Run ``spool broker`` expecting it to refuse; (exit code, stderr). Asserts that
    nothing was written to its data dir."""
    data = tmp_path / "data"
    cmd = [*BROKER, "-o", f"log.dirs={data}"]
    if listeners is not None:
        cmd += ["-o", f"listeners={listeners}"]
    try:
        proc = subprocess.run([*cmd, *args], capture_output=True, text=True,
                              timeout=REFUSED_WITHIN_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the broker started with {args}")
    assert "Traceback" not in proc.stderr
    assert not data.exists(), "refused after touching the data dir"
    return proc.returncode, proc.stderr


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, int, Path]:
    """Start ``spool broker`` expecting it to run; (process, port, stderr file)."""
    err = tmp_path / "stderr.log"
    with open(err, "wb") as f:
        proc = subprocess.Popen([*BROKER, "-o", f"log.dirs={tmp_path / 'data'}", *args],
                                stdout=subprocess.PIPE, stderr=f)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    m = re.search(r"listening on [0-9.]+:(\d+)", line)
    if not m:
        proc.kill()
        proc.wait()
        pytest.fail(f"broker did not start: {line!r} {err.read_text()}")
    return proc, int(m.group(1)), err


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---- listeners


def test_a_sasl_listener_with_kafkas_default_mechanism_is_refused(tmp_path):
    code, err = refuse(tmp_path, listeners="SASL_PLAINTEXT://127.0.0.1:0")
    assert code == 2
    assert err == (
        "spool broker: listener SASL_PLAINTEXT: sasl.enabled.mechanisms=GSSAPI: GSSAPI is not "
        "supported (Spool serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; GSSAPI, "
        "Kafka's default, needs Kerberos, which Spool does not have)\n"
    )


def test_a_listener_name_mapped_to_ssl_without_a_keystore_is_refused(tmp_path):
    code, err = refuse(tmp_path, "-o", "listener.security.protocol.map=EXTERNAL:SSL",
                       listeners="EXTERNAL://127.0.0.1:0")
    assert code == 2
    assert err == (
        "spool broker: listener EXTERNAL://127.0.0.1:0: no keystore: set ssl.keystore.location "
        "(PEM or PKCS12), or ssl.keystore.certificate.chain and ssl.keystore.key (PEM)\n"
    )


def test_an_unmapped_listener_name_is_refused(tmp_path):
    code, err = refuse(tmp_path, listeners="http://127.0.0.1:0")
    assert code == 2
    assert err == (
        "spool broker: listeners: listener 'http://127.0.0.1:0': no security protocol is "
        "mapped to listener name 'HTTP' in listener.security.protocol.map; only PLAINTEXT is "
        "supported yet\n"
    )


def test_a_listener_name_mapped_to_plaintext_is_served(tmp_path):
    proc, port, err = start(tmp_path, "-o", "listeners=EXTERNAL://127.0.0.1:0",
                            "-o", "listener.security.protocol.map=EXTERNAL:PLAINTEXT")
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        assert admin.list_topics(timeout=10).brokers[0].port == port
    finally:
        stop(proc)
    assert proc.returncode == 0, err.read_text()


# ---- values and keys


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("num.partitions=abc", "num.partitions=abc: expected an integer >= 1"),
        ("num.partitions=0", "num.partitions=0: expected an integer >= 1"),
        ("log.segment.bytes=14", "log.segment.bytes=14: expected an integer >= 1048576"),
        ("log.retention.hours=1.5", "log.retention.hours=1.5: expected an integer >= -1"),
        ("auto.create.topics.enable=yes", "auto.create.topics.enable=yes: expected true or false"),
        ("socket.request.max.bytes=99999999999",
         "socket.request.max.bytes=99999999999: expected an integer >= 1 and at most 2147483647"),
        ("log.cleanup.policy=shred",
         "log.cleanup.policy=shred: expected a comma-separated list of compact, delete"),
        ("log.message.timestamp.type=Now",
         "log.message.timestamp.type=Now: expected one of CreateTime, LogAppendTime"),
    ],
)
def test_a_bad_value_is_refused_with_key_value_and_what_is_allowed(tmp_path, override, message):
    code, err = refuse(tmp_path, "-o", override)
    assert (code, err) == (2, f"spool broker: {message}\n")


def test_a_bad_value_in_the_config_file_is_refused(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# a broker\nnum.partitions = six\n")
    code, err = refuse(tmp_path, "--config", str(props))
    assert (code, err) == (2, "spool broker: num.partitions=six: expected an integer >= 1\n")


def test_unknown_keys_are_warned_about_and_ignored(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("num.partitons=6\n")
    proc, port, err = start(tmp_path, "--config", str(props), "-o", "log.dirz=/elsewhere",
                            "-o", "listeners=PLAINTEXT://127.0.0.1:0", "--log-level", "WARNING")
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        md = admin.list_topics("auto-created", timeout=10)  # auto-created: num.partitions=1
        assert len(md.topics["auto-created"].partitions) == 1
    finally:
        stop(proc)
    warnings = [line.split(" WARNING ", 1)[1] for line in err.read_text().splitlines()
                if " WARNING " in line]
    assert warnings == [
        "spool.broker.config: The configuration 'num.partitons' was supplied but isn't a known "
        "config; it is ignored (did you mean 'num.partitions'?)",
        "spool.broker.config: The configuration 'log.dirz' was supplied but isn't a known "
        "config; it is ignored (did you mean 'log.dir' or 'log.dirs'?)",
    ]
    assert not Path("/elsewhere").exists()


def test_strict_config_refuses_unknown_keys(tmp_path):
    code, err = refuse(tmp_path, "--strict-config", "-o", "num.partitons=6", "-o", "flurb=1")
    assert code == 2
    assert err == (
        "spool broker: unknown configuration key 'num.partitons' (--strict-config); "
        "did you mean 'num.partitions'?\n"
        "spool broker: unknown configuration key 'flurb' (--strict-config)\n"
    )


def test_a_bad_log_level_is_refused_with_the_allowed_values(tmp_path):
    code, err = refuse(tmp_path, "--log-level", "LOUD")
    assert code == 2
    assert err == ("spool broker: --log-level: 'LOUD': the level must be one of DEBUG, INFO, "
                   "WARNING, ERROR (try 'spool broker --help')\n")
    code, err = refuse(tmp_path, "-o", "log.level=INFO,spool.storage=LOUD")
    assert code == 2
    assert "log.level=INFO,spool.storage=LOUD" in err and "DEBUG, INFO, WARNING, ERROR" in err


# ---- topic configs from clients


def _error(exc: pytest.ExceptionInfo) -> KafkaError:
    return exc.value.args[0]


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"segment.bytes": "14"}, "segment.bytes=14: expected an integer >= 1048576"),
        ({"retention.ms": "abc"}, "retention.ms=abc: expected an integer >= -1"),
        ({"retention.msx": "1"}, "unknown topic config retention.msx (did you mean 'retention.ms'?)"),
        ({"remote.storage.enable": "true"},
         "remote.storage.enable=true: expected false (Spool has no tiered storage)"),
        ({"compression.type": "zstd"},
         "compression.type=zstd: expected producer (Spool keeps each batch as its producer "
         "compressed it; it does not recompress)"),
    ],
)
def test_create_topics_refuses_bad_topic_configs(broker, topic_name, configs, message):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.create_topics([NewTopic(topic_name, 1, config=configs)])[topic_name]
    with pytest.raises(KafkaException) as e:
        fut.result(10)
    assert (_error(e).code(), _error(e).str()) == (KafkaError.INVALID_CONFIG, message)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_alter_configs_refuses_a_tiny_segment_bytes(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    res = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("segment.bytes", "14", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([res])[res].result(10)
    assert (_error(e).code(), _error(e).str()) == (
        KafkaError.INVALID_CONFIG, "segment.bytes=14: expected an integer >= 1048576")
    got = admin.describe_configs([ConfigResource("topic", topic_name)])
    cfg = next(iter(got.values())).result(10)
    assert cfg["segment.bytes"].value == "1073741824"


def test_internal_segment_bytes_is_refused_unless_the_broker_enables_it(broker, topic_name):
    """Test-only: tiny segments cost files and descriptors, so a client may not ask for
    them from a broker started normally."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.create_topics([NewTopic(topic_name, 1, config={"internal.segment.bytes": "4096"})]
                              )[topic_name]
    with pytest.raises(KafkaException) as e:
        fut.result(10)
    assert (_error(e).code(), _error(e).str()) == (
        KafkaError.INVALID_CONFIG, "internal.segment.bytes is a test-only config; this broker "
        "refuses it (internal.segment.bytes.enable=false)")
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    res = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("internal.segment.bytes", "4096", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([res])[res].result(10)
    assert _error(e).code() == KafkaError.INVALID_CONFIG
    broker_cfg = admin.describe_configs([ConfigResource("broker", "0")])
    assert "internal.segment.bytes.enable" not in next(iter(broker_cfg.values())).result(10)


def test_internal_segment_bytes_rolls_small_segments_and_stays_hidden(fresh_broker, topic_name):
    fresh_broker.overrides["internal.segment.bytes.enable"] = "true"
    broker = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, config={"internal.segment.bytes": "4096"})]
                        )[topic_name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(20):
        p.produce(topic_name, value=b"x" * 1000, key=b"%d" % i)
        p.flush(10)
    logs = sorted((broker.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(logs) >= 5
    res = ConfigResource("topic", topic_name)
    cfg = admin.describe_configs([res])[res].result(10)
    assert "internal.segment.bytes" not in cfg
    assert cfg["segment.bytes"].value == "1073741824"


def test_create_topics_refuses_a_null_config_value(broker, topic_name):
    c = RawClient(broker.bootstrap)
    try:
        req = CreateTopicsRequest(topics=[CreatableTopic(
            name=topic_name, num_partitions=1, replication_factor=1, assignments=[],
            configs=[CreatableTopicConfig(name="retention.ms", value=None)])],
            timeout_ms=10_000, validate_only=False)
        resp = c.request(19, 5, req)
    finally:
        c.close()
    [t] = resp.topics
    assert (t.error_code, t.error_message) == (
        KafkaError.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_acks_all_is_refused_when_min_insync_replicas_exceeds_the_single_node(broker, topic_name):
    """One node is an in-sync replica set of 1: min.insync.replicas=2 cannot be met, and
    acks=all says so (NOT_ENOUGH_REPLICAS, nothing appended) instead of acking anyway."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, config={"min.insync.replicas": "2"})]
                        )[topic_name].result(10)
    b = BatchBuilder()
    b.append(b"k", b"v", timestamp=1_700_000_000_000)
    records = b.build()
    c = RawClient(broker.bootstrap)
    try:
        answers = []
        for acks in (-1, 1):
            req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
                TopicProduceData(name=topic_name, partition_data=[
                    PartitionProduceData(index=0, records=records)])])
            p = c.request(0, 9, req).responses[0].partition_responses[0]
            answers.append((p.error_code, p.error_message, p.base_offset))
    finally:
        c.close()
    assert answers == [
        (KafkaError.NOT_ENOUGH_REPLICAS,
         f"the in-sync replica set of {topic_name}-0 has 1 replica(s), fewer than "
         f"min.insync.replicas=2", -1),
        (0, None, 0),  # acks=1 ignores min.insync.replicas, as in Kafka
    ]


def test_append_to_a_key_that_is_not_a_list_is_invalid_config(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, config={"retention.ms": "1000"})]
                        )[topic_name].result(10)
    res = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([res])[res].result(10)
    assert (_error(e).code(), _error(e).str()) == (
        KafkaError.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    ok = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([ok])[ok].result(10)
    got = admin.describe_configs([ConfigResource("topic", topic_name)])
    cfg = next(iter(got.values())).result(10)
    assert (cfg["cleanup.policy"].value, cfg["retention.ms"].value) == ("delete,compact", "1000")
