"""Several named listeners: each is bound, answers, and advertises itself to its clients.

A real ``spool broker`` with ``listeners=PLAINTEXT://...,EXTERNAL://...`` prints one
``listening on HOST:PORT (NAME)`` line per listener; a client of either listener
gets Metadata that names that listener's address (as Kafka answers with the
endpoints of the listener a request came in on), and confluent-kafka produces
through one and consumes through the other.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer

from spool.protocol._generated import MetadataRequest
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

_LINE = re.compile(r"listening on ([0-9.]+):(\d+) \((\w+)\)")


def start(tmp_path, *overrides: str) -> tuple[subprocess.Popen, dict[str, int]]:
    """A broker with these overrides; (process, {listener name: port}) from its stdout."""
    cmd = [sys.executable, "-m", "spool.cli.main", "broker", "--strict-config",
           "-o", f"log.dirs={tmp_path / 'data'}", "-o", "group.initial.rebalance.delay.ms=0"]
    for o in overrides:
        cmd += ["-o", o]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(tmp_path / "err", "wb"))  # noqa: SIM115
    ports: dict[str, int] = {}
    assert proc.stdout is not None
    for _ in range(2):
        m = _LINE.search(proc.stdout.readline().decode())
        if m is None:
            proc.kill()
            pytest.fail(f"broker did not start: {(tmp_path / 'err').read_text()}")
        ports[m.group(3)] = int(m.group(2))
    return proc, ports


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(20) == 0
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_two_listeners_are_bound_and_each_advertises_itself(tmp_path, topic_name):
    proc, ports = start(tmp_path, "listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT")
    try:
        assert set(ports) == {"PLAINTEXT", "EXTERNAL"}
        assert ports["PLAINTEXT"] != ports["EXTERNAL"]
        for name, port in ports.items():
            client = RawClient(f"127.0.0.1:{port}")
            try:
                resp = client.request(3, 12, MetadataRequest(topics=None))
            finally:
                client.close()
            assert [(b.host, b.port) for b in resp.brokers] == [("127.0.0.1", port)], name

        producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
        producer.produce(topic_name, b"through PLAINTEXT")
        assert producer.flush(15) == 0
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{ports['EXTERNAL']}",
                             "group.id": topic_name, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic_name])
            msg = None
            for _ in range(30):
                msg = consumer.poll(1.0)
                if msg is not None and msg.error() is None:
                    break
            assert msg is not None and msg.value() == b"through PLAINTEXT"
        finally:
            consumer.close()
    finally:
        stop(proc)
