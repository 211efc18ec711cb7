"""The standalone herder driven through its coroutines (what the REST API calls), with the
real worker, plugins, file offset store and a real broker: create, refuse, pause,
resume, stop, KIP-875 offsets, restart, reconfigure and delete a counting source."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from spool.connect.herder import ConnectRestError, TaskId
from spool.connect.herder_standalone import StandaloneHerder, load_connector_file
from spool.connect.plugins import Plugins
from spool.connect.worker_config import WorkerConfig
from tests.helpers.connect_plugins import counting_config


async def _until(fn: Any, timeout: float = 20.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    last = None
    while asyncio.get_running_loop().time() < deadline:
        last = await fn()
        if last:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"not reached in {timeout} s; last: {last!r}")


def _states(status: dict[str, Any]) -> tuple[str, list[str]]:
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


@pytest.fixture
def herder_config(broker, tmp_path) -> WorkerConfig:
    return WorkerConfig.from_props({
        "bootstrap.servers": broker.bootstrap,
        "offset.storage.file.filename": str(tmp_path / "offsets"),
        "offset.flush.interval.ms": "200",
        "listeners": "http://127.0.0.1:18083",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
    }, standalone=True)


def test_connector_lifecycle(herder_config):
    name = f"count-{uuid.uuid4().hex[:6]}"
    topic = f"t-{name}"

    async def main() -> None:
        h = StandaloneHerder(herder_config, Plugins.discover())
        await h.start()
        try:
            created, info = await h.put_connector_config(
                name, counting_config(name, topic, 2), allow_replace=False)
            assert created and info["type"] == "source"
            assert info["tasks"] == [{"connector": name, "task": 0},
                                     {"connector": name, "task": 1}]
            assert await h.connectors() == [name]

            async def running(n: int = 2) -> bool:
                st = await h.connector_status(name)
                return _states(st) == ("RUNNING", ["RUNNING"] * n)
            await _until(running)
            st = await h.connector_status(name)
            assert st["connector"]["worker_id"] == "127.0.0.1:18083" and st["type"] == "source"
            assert (await h.task_status(TaskId(name, 1)))["state"] == "RUNNING"
            tcs = await h.task_configs(name)
            assert [t["config"]["task.index"] for t in tcs] == ["0", "1"]

            with pytest.raises(ConnectRestError) as e:
                await h.put_connector_config(name, counting_config(name, topic, 2),
                                             allow_replace=False)
            assert (e.value.status, e.value.message) == (409, f"Connector {name} already exists")

            # pause and resume
            await h.pause_connector(name)
            await _until(lambda: _is(h, name, ("PAUSED", ["PAUSED", "PAUSED"])))
            await h.resume_connector(name)
            await _until(running)

            # offsets can only change once STOPPED (Kafka's message)
            with pytest.raises(ConnectRestError) as e:
                await h.reset_connector_offsets(name)
            assert e.value.status == 400 and e.value.message.startswith(
                "Connectors must be in the STOPPED state")
            await h.stop_connector(name)
            st = await h.connector_status(name)
            assert _states(st) == ("STOPPED", []) and (await h.connector_info(name))["tasks"] == []
            offsets = (await h.connector_offsets(name))["offsets"]
            assert sorted(o["partition"]["task"] for o in offsets) == [0, 1]
            msg = await h.alter_connector_offsets(
                name, [{"partition": {"task": 0}, "offset": {"seq": 999}}])
            assert "altered successfully" in msg
            got = {o["partition"]["task"]: o["offset"]
                   for o in (await h.connector_offsets(name))["offsets"]}
            assert got[0] == {"seq": 999}
            assert "reset successfully" in await h.reset_connector_offsets(name)
            assert (await h.connector_offsets(name))["offsets"] == []

            # resume from STOPPED: tasks again, task 0 counting from 0 after the reset
            await h.resume_connector(name)
            await _until(running)

            # reconfigure: 3 tasks
            _, info = await h.put_connector_config(
                name, counting_config(name, topic, 3), allow_replace=True)
            await _until(lambda: running(3))
            patched = await h.patch_connector_config(name, {"tasks.max": "1", "batch.size": None})
            assert patched["config"]["tasks.max"] == "1" and "batch.size" not in patched["config"]
            await _until(lambda: running(1))
            # replaced by the same config: the same task configs, the tasks run again
            await h.put_connector_config(name, await h.connector_config(name),
                                         allow_replace=True)
            await _until(lambda: running(1))
            assert h.worker.tasks() == {TaskId(name, 0)}

            # restart with tasks: the answer marks what restarts
            answer = await h.restart_connector(name, include_tasks=True)
            assert _states(answer) == ("RESTARTING", ["RESTARTING"])
            await _until(lambda: running(1))
            assert await h.restart_connector(name) is None
            await h.restart_task(TaskId(name, 0))
            await _until(lambda: running(1))
            with pytest.raises(ConnectRestError) as e:
                await h.restart_task(TaskId(name, 5))
            assert e.value.status == 404

            await h.delete_connector(name)
            assert await h.connectors() == [] and h.worker.tasks() == set()

            # created PAUSED: no tasks until resumed
            await h.put_connector_config(name, counting_config(name, topic, 2),
                                         allow_replace=False, initial_state="PAUSED")
            assert _states(await h.connector_status(name)) == ("PAUSED", [])
            await h.resume_connector(name)
            await _until(running)
            await h.delete_connector(name)
            with pytest.raises(ConnectRestError) as e:
                await h.connector_status(name)
            assert (e.value.status, e.value.message) == (
                404, f"No status found for connector {name}")
        finally:
            await h.stop()

    asyncio.run(main())


async def _is(h: StandaloneHerder, name: str, want: tuple[str, list[str]]) -> bool:
    return _states(await h.connector_status(name)) == want


def test_invalid_configs_are_refused_and_nothing_starts(herder_config):
    async def main() -> None:
        h = StandaloneHerder(herder_config, Plugins.discover())
        await h.start()
        try:
            bad = counting_config("bad", "t", 1)
            del bad["topic"]
            with pytest.raises(ConnectRestError) as e:
                await h.put_connector_config("bad", bad, allow_replace=False)
            assert e.value.status == 400
            lines = e.value.message.split("\n")
            assert lines[0] == ("Connector configuration is invalid and contains the "
                                "following 1 error(s):")
            assert lines[-1] == ("You can also find the above list of errors at the endpoint "
                                 "`/connector-plugins/{connectorType}/config/validate`")
            with pytest.raises(ConnectRestError) as e:
                await h.put_connector_config("nope", {"connector.class": "NoSuchConnector"},
                                             allow_replace=False)
            assert e.value.status == 400 and "NoSuchConnector" in e.value.message
            assert await h.connectors() == [] and h.worker.connectors() == set()
            infos = await h.validate("NoSuchConnector", {})
            assert infos["error_count"] >= 1
            with pytest.raises(ConnectRestError) as e:
                await h.connector_info("bad")
            assert e.value.status == 404
            with pytest.raises(ConnectRestError) as e:
                await h.plugin_config("NoSuchPlugin")
            assert e.value.status == 404
            keys = {k["name"]: k for k in await h.plugin_config(
                "tests.helpers.connect_plugins:CountingSourceConnector")}
            assert keys["topic"]["required"] and keys["batch.size"]["default_value"] == "10"
            info = await h.cluster_info()
            assert info["kafka_cluster_id"] and info["version"]
        finally:
            await h.stop()

    asyncio.run(main())


def test_connector_files(tmp_path):
    p = tmp_path / "c.properties"
    p.write_text("name=a\nconnector.class=X\ntasks.max=2\n")
    assert load_connector_file(p) == {"name": "a", "connector.class": "X", "tasks.max": "2"}
    j = tmp_path / "c.json"
    j.write_text('{"name": "b", "config": {"connector.class": "X", "tasks.max": 3}}')
    assert load_connector_file(j) == {"name": "b", "connector.class": "X", "tasks.max": "3"}


def test_sink_offsets_kip875(herder_config, broker, tmp_path):
    from confluent_kafka import Producer

    name, topic = f"sink-{uuid.uuid4().hex[:6]}", f"sink-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        p.produce(topic, f'"line {i}"'.encode(), partition=0)
    assert p.flush(10) == 0
    out = tmp_path / "out.txt"

    async def main() -> None:
        h = StandaloneHerder(herder_config, Plugins.discover())
        await h.start()
        try:
            await h.put_connector_config(name, {
                "connector.class": "FileStreamSink", "tasks.max": "1", "topics": topic,
                "file": str(out)}, allow_replace=False)
            await _until(lambda: _lines(out, 3))
            await h.stop_connector(name)

            async def offsets() -> list:
                return (await h.connector_offsets(name))["offsets"]
            part = {"kafka_topic": topic, "kafka_partition": 0}
            assert await _until(offsets) == [{"partition": part, "offset": {"kafka_offset": 3}}]
            await h.alter_connector_offsets(name, [{"partition": part,
                                                    "offset": {"kafka_offset": 1}}])
            assert await offsets() == [{"partition": part, "offset": {"kafka_offset": 1}}]
            await h.alter_connector_offsets(name, [{"partition": part, "offset": None}])
            assert await offsets() == []
            with pytest.raises(ConnectRestError) as e:
                await h.alter_connector_offsets(name, [{"partition": {"topic": topic},
                                                        "offset": None}])
            assert e.value.status == 400 and "'kafka_topic'" in e.value.message
            # resumed at offset 2: the sink writes "line 2" once more
            await h.alter_connector_offsets(name, [{"partition": part,
                                                    "offset": {"kafka_offset": 2}}])
            await h.resume_connector(name)
            await _until(lambda: _lines(out, 4))
            await h.stop_connector(name)
            assert "reset successfully" in await h.reset_connector_offsets(name)
            assert await offsets() == []
        finally:
            await h.stop()

    asyncio.run(main())


async def _lines(path, n: int) -> bool:
    return path.exists() and len(path.read_text().splitlines()) == n
