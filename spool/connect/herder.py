"""The herder: what the REST API asks of a Connect cluster, and the answers' shapes.

``Herder`` is implemented twice: ``herder_standalone.StandaloneHerder`` (one process,
offsets in a file, configs from the command line and REST, nothing shared) and
``herder_distributed.DistributedHerder`` (workers in a group with protocol type
``connect``; configs, offsets and statuses in compacted topics). ``rest.py`` calls these
coroutines and turns ``ConnectRestError`` into Kafka Connect's error body
``{"error_code": status, "message": ...}``; ``NotLeaderError`` makes it forward the
request to the leader's URL (writes go to the leader, as in Kafka).

Answers are plain dicts in Kafka Connect's JSON shapes, so the REST layer serialises
them as they are:

- ``ConnectorInfo``: ``{"name", "config": {...}, "tasks": [{"connector", "task"}],
  "type": "source"|"sink"}``
- ``ConnectorStateInfo``: ``{"name", "connector": {"state", "worker_id"[, "trace"]},
  "tasks": [{"id", "state", "worker_id"[, "trace"]}], "type"}``; states ``UNASSIGNED``,
  ``RUNNING``, ``PAUSED``, ``STOPPED``, ``FAILED``, ``RESTARTING``
- ``TaskInfo``: ``{"id": {"connector", "task"}, "config": {...}}``
- ``ConfigInfos`` (validation): ``{"name", "error_count", "groups": [...], "configs":
  [{"definition": {...}, "value": {"name", "value", "recommended_values", "errors",
  "visible"}}]}``
- offsets (KIP-875): ``{"offsets": [{"partition": {...}, "offset": {...}}]}``; for a sink,
  partitions are ``{"kafka_topic", "kafka_partition"}`` and offsets ``{"kafka_offset"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING")
TARGET_STATES = ("STARTED", "PAUSED", "STOPPED")


class ConnectRestError(Exception):
    """An answer other than success: ``status`` is the HTTP status and the body's
    ``error_code``; ``message`` its ``message`` (Kafka's wording where Kafka has one:
    ``Connector foo not found``, ``Connector foo already exists``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def not_found(name: str) -> ConnectRestError:
    return ConnectRestError(404, f"Connector {name} not found")


class NotLeaderError(Exception):
    """This worker is not the group's leader; ``leader_url`` is (None during a rebalance:
    the REST layer answers 409 ``Cannot complete request momentarily due to no known
    leader URL, likely because a rebalance is underway``)."""

    def __init__(self, leader_url: str | None) -> None:
        super().__init__(leader_url or "no known leader")
        self.leader_url = leader_url


@dataclass(frozen=True, order=True)
class TaskId:
    connector: str
    task: int

    def as_json(self) -> dict[str, Any]:
        return {"connector": self.connector, "task": self.task}

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


class Herder:
    """The contract both herders keep (module doc); every method is a coroutine run on
    the REST server's event loop and must not block it."""

    worker_id: str  # host:port of this worker's REST listener, as statuses report it

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def cluster_info(self) -> dict[str, Any]:
        """``{"version", "commit", "kafka_cluster_id"}`` (``GET /``)."""
        raise NotImplementedError

    async def connectors(self) -> list[str]:
        raise NotImplementedError

    async def connector_info(self, name: str) -> dict[str, Any]:
        raise NotImplementedError

    async def connector_config(self, name: str) -> dict[str, str]:
        raise NotImplementedError

    async def put_connector_config(self, name: str, config: dict[str, str], *,
                                   allow_replace: bool,
                                   initial_state: str = "STARTED") -> tuple[bool, dict[str, Any]]:
        """Create or replace; ``(created, ConnectorInfo)``. The config is validated first
        (400 with the errors when invalid; nothing is written); 409 when it exists and
        ``allow_replace`` is false (``POST /connectors``)."""
        raise NotImplementedError

    async def patch_connector_config(self, name: str,
                                     patch: dict[str, str | None]) -> dict[str, Any]:
        """KIP-477: merge (a None value removes the key), validate, write."""
        raise NotImplementedError

    async def delete_connector(self, name: str) -> None:
        raise NotImplementedError

    async def connector_status(self, name: str) -> dict[str, Any]:
        raise NotImplementedError

    async def task_status(self, task: TaskId) -> dict[str, Any]:
        raise NotImplementedError

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Internal (``POST /connectors/{name}/tasks``): the worker running a connector
        hands its task configs to the leader, which writes them."""
        raise NotImplementedError

    async def restart_connector(self, name: str, *, include_tasks: bool = False,
                                only_failed: bool = False) -> dict[str, Any] | None:
        """None: the connector alone was restarted (204); else the ConnectorStateInfo with
        what is restarting (202)."""
        raise NotImplementedError

    async def restart_task(self, task: TaskId) -> None:
        raise NotImplementedError

    async def pause_connector(self, name: str) -> None:
        raise NotImplementedError

    async def resume_connector(self, name: str) -> None:
        raise NotImplementedError

    async def stop_connector(self, name: str) -> None:
        raise NotImplementedError

    async def connector_offsets(self, name: str) -> dict[str, Any]:
        raise NotImplementedError

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        """KIP-875 PATCH; the connector must be STOPPED (400 otherwise); the message."""
        raise NotImplementedError

    async def reset_connector_offsets(self, name: str) -> str:
        """KIP-875 DELETE; the connector must be STOPPED (400 otherwise); the message."""
        raise NotImplementedError

    async def connector_topics(self, name: str) -> dict[str, Any]:
        """KIP-558: ``{name: {"topics": [...]}}``, the topics the connector has used."""
        raise NotImplementedError

    async def reset_connector_topics(self, name: str) -> None:
        """KIP-558 (``PUT /connectors/{name}/topics/reset``): forget the topics recorded."""
        raise NotImplementedError

    async def plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        """``[{"class", "type", "version"}]`` (``GET /connector-plugins``)."""
        raise NotImplementedError

    async def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        """The plugin's ConfigKey definitions (``GET /connector-plugins/{p}/config``)."""
        raise NotImplementedError

    async def validate(self, plugin: str, config: dict[str, str]) -> dict[str, Any]:
        """ConfigInfos for ``config`` against the worker's connector keys and ``plugin``'s
        (``PUT /connector-plugins/{p}/config/validate``); never raises for a bad config
        (the errors are in the answer)."""
        raise NotImplementedError
