"""Connectors for tests of the runtime, loaded by ``spool connect`` workers through their
Python path (``connector.class=tests.helpers.connect_plugins:CountingSourceConnector``):
a test's worker runs with this checkout on its ``PYTHONPATH`` (``connect_proc``).

``CountingSourceConnector`` (keys ``topic``, required; ``batch.size``, default 10;
``poll.interval.ms``, default 100): ``tasks.max`` tasks, task ``i`` writing records with
key ``"<i>"`` and value ``{"task": i, "seq": n}`` (n = 0, 1, 2, ... per task) to
``topic``, each with source partition ``{"task": i}`` and offset ``{"seq": n}``; on start a
task continues after the last committed offset, so a task that moves to another worker
goes on counting where its offsets say (at least once: the numbers it wrote after the last
flush are written again).
"""

from __future__ import annotations

import threading
from typing import Any

from spool.connect import api


def _def() -> api.ConfigDef:
    return (api.ConfigDef()
            .define("topic", api.STRING, importance=api.HIGH, doc="Where the records go")
            .define("batch.size", api.INT, 10, api.LOW, "Records per poll",
                    validator=api.at_least(1))
            .define("poll.interval.ms", api.INT, 100, api.LOW, "Pause between polls",
                    validator=api.at_least(0)))


class CountingSourceTask(api.SourceTask):
    def start(self, props: dict[str, str]) -> None:
        values = _def().parse(props)
        self.topic = values["topic"]
        self.batch = values["batch.size"]
        self.interval = values["poll.interval.ms"] / 1000
        self.index = int(props["task.index"])
        self.partition = {"task": self.index}
        last = self.context.offset_storage_reader.offset(self.partition)
        self.next = int(last["seq"]) + 1 if last else 0
        self._stopped = threading.Event()

    def poll(self) -> list[api.SourceRecord]:
        if self._stopped.wait(self.interval):
            return []
        out = []
        for _ in range(self.batch):
            n = self.next
            self.next += 1
            out.append(api.SourceRecord(
                topic=self.topic, kafka_partition=None, key_schema=None,
                key=str(self.index), value_schema=None,
                value={"task": self.index, "seq": n},
                source_partition=dict(self.partition), source_offset={"seq": n}))
        return out

    def stop(self) -> None:
        self._stopped.set()


class CountingSourceConnector(api.SourceConnector):
    def version(self) -> str:
        return "1.0-test"

    def start(self, props: dict[str, str]) -> None:
        _def().parse(props)
        self.props = dict(props)

    def task_class(self) -> type[api.Task]:
        return CountingSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "task.index": str(i)} for i in range(max_tasks)]

    def config_def(self) -> api.ConfigDef:
        return _def()


def counting_config(name: str, topic: str, tasks: int, **extra: Any) -> dict[str, str]:
    return {"name": name,
            "connector.class": "tests.helpers.connect_plugins:CountingSourceConnector",
            "tasks.max": str(tasks), "topic": topic, **{k: str(v) for k, v in extra.items()}}
