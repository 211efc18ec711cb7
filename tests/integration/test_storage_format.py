"""``spool storage``: random-uuid and format, and a KRaft node's refusal of dirs not its own.

Through the real CLI: ``spool storage random-uuid`` prints a Kafka Uuid;
``spool storage format`` writes meta.properties (cluster.id, node.id,
version=1, directory.id) into every log dir and metadata.log.dir; a node with
``process.roles`` refuses, with exit code 1 and one line naming the problem, a
dir never formatted, a dir of another node, and dirs of two clusters; once
formatted it binds its broker and controller listeners, and each serves its
own plane's APIs.
"""

from __future__ import annotations

import base64
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from spool.broker.config import BrokerConfig
from spool.protocol._generated import ApiVersionsRequest, MetadataRequest
from tests.helpers.ports import free_base_port
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

SPOOL = [sys.executable, "-m", "spool.cli.main"]
UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")


def spool(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*SPOOL, *args], capture_output=True, text=True, timeout=timeout)


def kraft_config(tmp_path: Path, node_id: int = 1, **extra: str) -> Path:
    """A combined broker+controller, the only voter (its CONTROLLER port is its voter
    address), PLAINTEXT on an ephemeral port."""
    port = free_base_port(1)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": f"{node_id}@127.0.0.1:{port}",
        "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}",
        "metadata.log.dir": str(tmp_path / "meta"),
        **extra,
    }
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def meta_properties(d: Path) -> dict[str, str]:
    lines = (d / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def start_refused(config: Path, *overrides: str) -> subprocess.CompletedProcess:
    args = ["broker", "--config", str(config)]
    for o in overrides:
        args += ["-o", o]
    done = spool(*args, timeout=30)
    assert "Traceback" not in done.stderr
    return done


def test_random_uuid_prints_a_kafka_uuid():
    ids = {spool("storage", "random-uuid").stdout for _ in range(2)}
    assert len(ids) == 2
    for text in ids:
        assert text.endswith("\n") and UUID_TEXT.fullmatch(text.strip())
        assert not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text.strip() + "==")) == 16


def test_format_writes_meta_properties_into_every_log_dir_and_the_metadata_dir(tmp_path):
    config = kraft_config(tmp_path)
    cid = spool("storage", "random-uuid").stdout.strip()
    done = spool("storage", "format", "--cluster-id", cid, "--config", str(config))
    assert done.returncode == 0, done.stderr
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "meta"]
    assert done.stdout.splitlines() == [
        f"Formatting {d} with cluster.id {cid} node.id 1." for d in dirs]
    props = [meta_properties(d) for d in dirs]
    for p in props:
        assert (p["cluster.id"], p["node.id"], p["version"]) == (cid, "1", "1")
        assert UUID_TEXT.fullmatch(p["directory.id"])
    assert len({p["directory.id"] for p in props}) == 3

    again = spool("storage", "format", "--cluster-id", cid, "--config", str(config))
    assert again.returncode == 1
    assert again.stderr == (
        f"spool storage format: Log directory {tmp_path / 'a'} is already formatted. Use "
        "--ignore-formatted to ignore this directory and format the others.\n")


def test_format_warns_about_unknown_keys(tmp_path):
    done = spool("storage", "format", "-t", "blue", "-c", str(kraft_config(tmp_path)),
                 "-o", "log.dirz=/x")
    assert done.returncode == 0
    assert done.stderr == (
        "spool storage format: The configuration 'log.dirz' was supplied but isn't a known "
        "config; it is ignored (did you mean 'log.dir' or 'log.dirs'?)\n")


def test_format_needs_a_cluster_id(tmp_path):
    done = spool("storage", "format", "--config", str(kraft_config(tmp_path)))
    assert done.returncode == 1
    assert done.stderr == ("spool storage format: You must specify the cluster id "
                           "(--cluster-id; `spool storage random-uuid` prints a new one).\n")
    assert not (tmp_path / "a").exists() or not (tmp_path / "a" / "meta.properties").exists()


def test_format_refuses_a_bad_configuration(tmp_path):
    config = kraft_config(tmp_path, **{"controller.quorum.voters": "2@127.0.0.1:9"})
    done = spool("storage", "format", "--cluster-id", "x", "--config", str(config))
    assert done.returncode == 2
    assert done.stderr == (
        "spool storage format: If process.roles contains the 'controller' role, the node id 1 "
        "must be included in the set of voters controller.quorum.voters=Set(2)\n")
    assert not (tmp_path / "a").exists()


def test_a_kraft_node_refuses_an_unformatted_dir(tmp_path):
    done = start_refused(kraft_config(tmp_path))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"spool broker: No meta.properties found in {tmp_path / 'a'} (have you run `spool "
        "storage format` to format the directory?). A node with process.roles set needs every "
        "log dir and metadata.log.dir formatted with the cluster's id.")
    assert not (tmp_path / "a" / "meta.properties").exists()


def test_a_kraft_node_refuses_a_dir_of_another_node(tmp_path):
    config = kraft_config(tmp_path)
    assert spool("storage", "format", "-t", "blue", "-c", str(config)).returncode == 0
    voters = BrokerConfig.load(config).get("controller.quorum.voters").replace("1@", "2@")
    done = start_refused(config, "node.id=2", f"controller.quorum.voters={voters}")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"spool broker: {tmp_path / 'a' / 'meta.properties'} says node.id=1 but this broker is "
        "configured with node.id=2: the dir belongs to another node")


def test_a_kraft_node_refuses_dirs_of_two_clusters(tmp_path):
    config = kraft_config(tmp_path)
    assert spool("storage", "format", "-t", "blue", "-c", str(config),
                 "-o", f"log.dirs={tmp_path / 'a'}").returncode == 0
    assert spool("storage", "format", "-t", "green", "-c", str(config),
                 "-o", f"log.dirs={tmp_path / 'b'}",
                 "-o", f"metadata.log.dir={tmp_path / 'b'}").returncode == 0
    done = start_refused(config)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"spool broker: {tmp_path / 'b' / 'meta.properties'} says cluster.id=green but "
        f"{tmp_path / 'a' / 'meta.properties'} says cluster.id=blue: the log dirs belong to "
        "different clusters")


def test_a_kraft_node_refuses_a_dir_of_another_configured_cluster(tmp_path):
    config = kraft_config(tmp_path)
    assert spool("storage", "format", "-t", "blue", "-c", str(config)).returncode == 0
    done = start_refused(config, "cluster.id=red")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"spool broker: {tmp_path / 'a' / 'meta.properties'} says cluster.id=blue but this "
        "broker is configured with cluster.id=red: the dir belongs to another cluster")


def _api_keys(port: int) -> set[int]:
    client = RawClient(f"127.0.0.1:{port}")
    try:
        return {k.api_key for k in client.request(18, 3, ApiVersionsRequest(
            client_software_name="t", client_software_version="1")).api_keys}
    finally:
        client.close()


def test_a_formatted_kraft_node_serves_each_plane_on_its_listener(tmp_path):
    config = kraft_config(tmp_path)
    assert spool("storage", "format", "-t", "blue", "-c", str(config)).returncode == 0
    err = open(tmp_path / "err", "wb")  # noqa: SIM115
    proc = subprocess.Popen([*SPOOL, "broker", "--config", str(config), "--strict-config"],
                            stdout=subprocess.PIPE, stderr=err)
    err.close()
    try:
        ports: dict[str, int] = {}
        assert proc.stdout is not None
        while len(ports) < 2:
            line = proc.stdout.readline().decode()
            if not line:
                pytest.fail(f"the node exited: {(tmp_path / 'err').read_text()}")
            m = re.search(r"listening on [0-9.]+:(\d+) \((\w+)\)", line)
            if m:
                ports[m.group(2)] = int(m.group(1))
        broker_apis, controller_apis = _api_keys(ports["PLAINTEXT"]), _api_keys(ports["CONTROLLER"])
        assert {0, 1, 3, 18} <= broker_apis  # Produce, Fetch, Metadata, ApiVersions
        assert 18 in controller_apis and not {0, 3} & controller_apis

        client = RawClient(f"127.0.0.1:{ports['CONTROLLER']}")
        try:  # an API of the other plane closes the connection (Kafka: "not enabled")
            client.send(3, 12, MetadataRequest(topics=None))
            assert client.is_closed_by_peer()
        finally:
            client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
