"""spool.cli.perf_props: Kafka's perf-tool client properties as confluent-kafka settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from spool.cli.common import CliError
from spool.cli.perf_props import librdkafka, read, split_args


def test_file_then_pairs_and_the_java_names(tmp_path: Path) -> None:
    f = tmp_path / "producer.properties"
    f.write_text("# Kafka's producer config\nacks=1\nlinger.ms=50\n"
                 "key.serializer=org.apache.kafka.common.serialization.ByteArraySerializer\n"
                 "buffer.memory=33554432\nmax.request.size=2097152\n"
                 "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                 "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                 'required username="alice" password="secret";\n')
    props = read(str(f), ["linger.ms=5", "bootstrap.servers=a:9092,b:9092"], "--producer-props")
    assert props["linger.ms"] == "5"  # the pairs win over the file
    connection, own = librdkafka(props, "--producer-props")
    assert connection["bootstrap.servers"] == "a:9092,b:9092"  # commas kept
    assert (connection["security.protocol"], connection["sasl.mechanism"]) == (
        "sasl_plaintext", "PLAIN")
    assert (connection["sasl.username"], connection["sasl.password"]) == ("alice", "secret")
    assert own == {"acks": "1", "linger.ms": "5", "queue.buffering.max.kbytes": 32768,
                   "message.max.bytes": "2097152"}  # no serializer


def test_bad_properties_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(CliError, match=r"--producer-props: invalid property 'acks' "
                                       r"\(expected key=value\)"):
        read(None, ["acks"], "--producer-props")
    with pytest.raises(CliError, match="cannot read .*nope"):
        read(str(tmp_path / "nope"), [], "--consumer.config")
    with pytest.raises(CliError, match="--consumer.config: .*security.protocol=BOGUS"):
        librdkafka({"security.protocol": "BOGUS"}, "--consumer.config")


def test_split_args() -> None:
    assert split_args(["t", "acks=1", "linger.ms=5"], None, True) == ("t", ["acks=1",
                                                                         "linger.ms=5"])
    assert split_args(None, "t", False) == ("t", [])
    with pytest.raises(CliError, match="unexpected argument 'acks=1'"):
        split_args(["t", "acks=1"], None, False)
    with pytest.raises(CliError, match="one topic only"):
        split_args(["t"], "u", False)
