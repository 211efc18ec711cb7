"""``spool connect``'s command line: a worker config that is not valid is one line and exit
2, a listener in use exit 1, and a standalone worker given connector files runs them and
stops cleanly (exit 0) on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.helpers.connect_proc import (
    ConnectProcess,
    call,
    distributed_props,
    wait_until,
    write_properties,
)

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
DISTRIBUTED = {"group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
               "status.storage.topic": "s", "bootstrap.servers": "127.0.0.1:1",
               "listeners": "http://127.0.0.1:0"}


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spool.cli.main", "connect", *args],
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=timeout)


@pytest.mark.parametrize("props, overrides, message", [
    ({**DISTRIBUTED, "bogus.key": "1"}, [], "Unknown configuration 'bogus.key'"),
    ({k: v for k, v in DISTRIBUTED.items() if k != "group.id"}, [],
     'Missing required configuration "group.id" which has no default value.'),
    (DISTRIBUTED, ["session.timeout.ms=abc"],
     "Invalid value abc for configuration session.timeout.ms: Not a number of type INT"),
    (DISTRIBUTED, ["exactly.once.source.support=maybe"],
     "Invalid value maybe for configuration exactly.once.source.support"),
], ids=["unknown-key", "missing-required", "wrong-type", "bad-choice"])
def test_an_invalid_worker_config_is_one_line_and_exit_2(tmp_path, props, overrides, message):
    path = write_properties(tmp_path / "worker.properties", props)
    args = ["--config", str(path)]
    for o in overrides:
        args += ["--override", o]
    r = run(*args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert r.stderr.startswith("spool")
    assert "Traceback" not in r.stderr
    assert "listening on" not in r.stdout


def test_standalone_needs_its_offsets_file(tmp_path):
    path = write_properties(tmp_path / "worker.properties",
                            {"bootstrap.servers": "127.0.0.1:1"})
    r = run("--config", str(path), "--standalone")
    assert r.returncode == 2
    assert ('Missing required configuration "offset.storage.file.filename" which has no '
            'default value.') in r.stderr


def test_connector_files_need_standalone(tmp_path):
    path = write_properties(tmp_path / "worker.properties", DISTRIBUTED)
    conn = write_properties(tmp_path / "c.properties", {"name": "x"})
    r = run("--config", str(path), str(conn))
    assert r.returncode == 2
    assert "connector files are taken with --standalone only" in r.stderr


def test_a_config_file_that_is_not_there_is_exit_2(tmp_path):
    r = run("--config", str(tmp_path / "nope.properties"))
    assert r.returncode == 2
    assert "nope.properties: no such file" in r.stderr


def test_a_listener_in_use_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        path = write_properties(tmp_path / "worker.properties",
                                {**DISTRIBUTED, "listeners": f"http://127.0.0.1:{port}"})
        r = run("--config", str(path))
    assert r.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
def _consume(bootstrap: str, topic: str, n: int, timeout: float = 30) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(json.loads(m.value()))
    finally:
        c.close()
    return got


def test_standalone_runs_its_connector_files_and_stops_on_sigterm(broker, tmp_path):
    topic = f"file-{uuid.uuid4().hex[:10]}"
    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(5)))
    props_file = write_properties(tmp_path / "file-source.properties", {
        "name": "file-source", "connector.class": "FileStreamSource", "tasks.max": "1",
        "file": str(source), "topic": topic})
    json_file = tmp_path / "counting.json"
    json_file.write_text(json.dumps({"name": "counting", "config": {
        "connector.class": "tests.helpers.connect_plugins:CountingSourceConnector",
        "tasks.max": 2, "topic": f"{topic}-n"}}))
    w = ConnectProcess(tmp_path, {
        "bootstrap.servers": broker.bootstrap,
        "offset.storage.file.filename": str(tmp_path / "offsets"),
        "offset.flush.interval.ms": "500",
        "value.converter.schemas.enable": "false"},
        standalone=True, connector_files=[props_file, json_file])
    try:
        w.start()
        assert w.call("GET", "/connectors").body == ["counting", "file-source"]
        w.wait_running("file-source", 1)
        w.wait_running("counting", 2)
        assert _consume(broker.bootstrap, topic, 5) == [f"line {i}" for i in range(5)]
        assert w.stop() == 0
    finally:
        w.kill()
    assert "Traceback" not in w.log_tail(20000)


def test_standalone_refuses_an_invalid_connector_file(broker, tmp_path):
    bad = write_properties(tmp_path / "bad.properties", {
        "name": "bad", "connector.class": "NoSuchConnector", "tasks.max": "1"})
    worker = write_properties(tmp_path / "worker.properties", {
        "bootstrap.servers": broker.bootstrap, "listeners": "http://127.0.0.1:0",
        "offset.storage.file.filename": str(tmp_path / "offsets")})
    r = run("--config", str(worker), "--standalone", str(bad))
    assert r.returncode == 1
    assert "bad.properties" in r.stderr
    assert "Failed to find any class that implements Connector and which name matches " \
           "NoSuchConnector" in r.stderr
    assert "listening on" not in r.stdout


def test_sigterm_while_running_distributed_is_exit_0(broker, tmp_path):
    w = ConnectProcess(tmp_path, distributed_props(broker.bootstrap,
                                                   f"cli-{uuid.uuid4().hex[:8]}"))
    try:
        w.start()
        assert w.call("GET", "/connectors").body == []
        assert w.proc is not None
        w.proc.send_signal(signal.SIGTERM)
        assert w.proc.wait(30) == 0
    finally:
        w.kill()


def test_while_starting_it_answers_503_and_sigterm_stops_it(tmp_path):
    """A cluster that does not answer: the worker never finishes starting; meanwhile its
    REST API answers 503, and SIGTERM still stops it cleanly (exit 0)."""
    with socket.socket() as s:  # a port free now (the worker binds it at once)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = write_properties(tmp_path / "worker.properties",
                            {**DISTRIBUTED, "listeners": f"http://127.0.0.1:{port}"})
    with open(tmp_path / "worker.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "spool.cli.main", "connect",
                                 "--config", str(path)], stdout=subprocess.PIPE,
                                stderr=log, env=ENV, cwd=ROOT)
    try:
        a = wait_until(lambda: call(f"http://127.0.0.1:{port}", "GET", "/connectors"), 30,
                       what="an answer")
        assert (a.status, a.body) == (503, {
            "error_code": 503,
            "message": "Request cannot be completed because the worker is starting up"})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert proc.stdout is not None and b"listening on" not in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_cluster_that_does_not_answer_is_exit_1_after_the_start_timeout(tmp_path):
    path = write_properties(tmp_path / "worker.properties", DISTRIBUTED)
    r = run("--config", str(path), "--start-timeout", "3")
    assert r.returncode == 1, r.stderr
    assert ("spool: the worker did not start: not started within 3 s: is the cluster at "
            "127.0.0.1:1 reachable?") in r.stderr
    assert "listening on" not in r.stdout
