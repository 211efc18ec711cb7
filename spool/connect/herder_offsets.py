"""KIP-875: a connector's offsets listed, altered and reset through the herder.

``OffsetsMixin`` is part of ``herder_common.BaseHerder`` (it uses its ``config``,
``offsets``, ``_props``, ``_kind`` and ``_state``):

- a **source** connector's offsets are its records in the offset store
  (``offset_store``: ``connector_offsets``, ``put``; a None offset is a tombstone);
- a **sink** connector's are its consumer group's committed offsets (group
  ``connect-<name>``, or ``consumer.override.group.id``), as ``{"kafka_topic",
  "kafka_partition"}`` -> ``{"kafka_offset"}``: listed and altered with confluent-kafka's
  AdminClient, a null offset deleted with OffsetDelete (``delete_group_offsets``, over
  spool.net), reset by deleting the group.

Altering or resetting needs the connector STOPPED with no tasks (400 with Kafka's
message otherwise); the answers are Kafka's messages (``ALTERED``, ``RESET``: the
framework-managed offsets, as a connector without its own ``alter_offsets``). The
``_*_sync`` methods block: the herders call them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from spool.connect.herder import ConnectRestError

MUST_BE_STOPPED = ("Connectors must be in the STOPPED state before their offsets can be "
                   "modified. This can be done for the specified connector by issuing a "
                   "'PUT' request to the '/connectors/{}/stop' endpoint")
ALTERED = ("The Connect framework-managed offsets for this connector have been altered "
           "successfully. However, if this connector manages offsets externally, they will "
           "need to be manually altered in the system that the connector uses.")
RESET = ("The Connect framework-managed offsets for this connector have been reset "
         "successfully. However, if this connector manages offsets externally, they will "
         "need to be manually reset in the system that the connector uses.")


def sink_group_id(name: str, props: dict[str, str]) -> str:
    return props.get("consumer.override.group.id") or f"connect-{name}"


class OffsetsMixin:
    """KIP-875 for both herders (module doc)."""

    config: Any
    offsets: Any

    async def connector_offsets(self, name: str) -> dict[str, Any]:
        props = self._props(name)
        if self._kind(props) == "sink":
            return {"offsets": await asyncio.to_thread(self._sink_offsets, name, props)}
        pairs = await asyncio.to_thread(self.offsets.connector_offsets, name)
        return {"offsets": [{"partition": p, "offset": o} for p, o in pairs]}

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient
        return AdminClient(self.config.client_config("admin"))

    def _sink_offsets(self, name: str, props: dict[str, str]) -> list[dict[str, Any]]:
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
        group = sink_group_id(name, props)
        try:
            admin = self._admin()  # kept referenced: a collected client's futures never end
            fut = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)])[group]
            tps = fut.result(timeout=30).topic_partitions or []
        except KafkaException as e:
            if "GROUP_ID_NOT_FOUND" in str(e):
                return []
            raise
        return [{"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                 "offset": {"kafka_offset": tp.offset}}
                for tp in sorted(tps, key=lambda tp: (tp.topic, tp.partition)) if tp.offset >= 0]

    def _check_stopped(self, name: str) -> dict[str, str]:
        props = self._props(name)
        state = self._state()
        if state.target_state(name) != "STOPPED" or state.task_count(name):
            raise ConnectRestError(400, MUST_BE_STOPPED.format(name))
        return props

    def _alter_sync(self, name: str, props: dict[str, str],
                    offsets: list[dict[str, Any]] | None) -> None:
        sink = self._kind(props) == "sink"
        if offsets is None:  # reset
            if sink:
                self._delete_group(sink_group_id(name, props))
            else:
                pairs = self.offsets.connector_offsets(name)
                self.offsets.put(name, [(p, None) for p, _ in pairs], 30)
            return
        if sink:
            self._alter_sink(name, props, offsets)
        else:
            self.offsets.put(name, [(o["partition"], o.get("offset")) for o in offsets], 30)

    def _delete_group(self, group: str) -> None:
        from confluent_kafka import KafkaException
        try:
            admin = self._admin()
            admin.delete_consumer_groups([group])[group].result(timeout=30)
        except KafkaException as e:
            if "GROUP_ID_NOT_FOUND" not in str(e):
                raise ConnectRestError(500, f"Failed to reset offsets for group {group}: {e}") \
                    from None

    def _alter_sink(self, name: str, props: dict[str, str],
                    offsets: list[dict[str, Any]]) -> None:
        """KIP-875 for a sink: its consumer group's committed offsets; a null offset
        deletes that partition's (OffsetDelete, as Kafka's deleteConsumerGroupOffsets)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        alter, delete = [], []
        for o in offsets:
            p, off = o["partition"], o.get("offset")
            if not isinstance(p, dict) or "kafka_topic" not in p or "kafka_partition" not in p:
                raise ConnectRestError(400, "The partition for a sink connector offset must "
                                            "contain the keys 'kafka_topic' and "
                                            "'kafka_partition'.")
            try:
                tp = (str(p["kafka_topic"]), int(p["kafka_partition"]))
                if off is None:
                    delete.append(tp)
                    continue
                if "kafka_offset" not in off:
                    raise ValueError
                alter.append(TopicPartition(*tp, int(off["kafka_offset"])))
            except (TypeError, ValueError):
                raise ConnectRestError(400, "The offset for a sink connector should either be "
                                            "null or contain the key 'kafka_offset' (a "
                                            "number); partitions are numbers") from None
        group = sink_group_id(name, props)
        if alter:
            admin = self._admin()
            admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, alter)])[group].result(timeout=30)
        if delete:
            asyncio.run(delete_group_offsets(self.config, group, delete))

    def _check_offsets_body(self, offsets: Any) -> list[dict[str, Any]]:
        if not isinstance(offsets, list) or not offsets:
            raise ConnectRestError(400, "Partitions / offsets need to be provided for an "
                                        "alter offsets request")
        for o in offsets:
            if not isinstance(o, dict) or not isinstance(o.get("partition"), dict):
                raise ConnectRestError(400, "Each entry needs a 'partition' object")
            if o.get("offset") is not None and not isinstance(o["offset"], dict):
                raise ConnectRestError(400, "An entry's 'offset' must be an object or null")
        return offsets


async def delete_group_offsets(config: Any, group: str, tps: list[tuple[str, int]]) -> None:
    """OffsetDelete v0 to ``group``'s coordinator (found through the bootstrap servers);
    ConnectRestError(500) naming the first partition the coordinator refused."""
    from spool.connect.herder_common import client_security
    from spool.net.client import NodeClient
    from spool.protocol._generated.find_coordinator_request import FindCoordinatorRequest
    from spool.protocol._generated.offset_delete_request import (
        OffsetDeleteRequest,
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )
    from spool.protocol.errors import error_name

    security = client_security(config)
    host, _, port = str(list(config.get("bootstrap.servers"))[0]).rpartition(":")
    boot = NodeClient(host.strip("[]"), int(port), security=security)
    try:
        fc = await boot.request(FindCoordinatorRequest(key=group, key_type=0), 3)
    finally:
        await boot.close()
    if fc.error_code:
        raise ConnectRestError(500, f"Could not find the coordinator of group {group}: "
                                    f"{error_name(fc.error_code)}")
    coord = NodeClient(fc.host, fc.port, security=security)
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    try:
        r = await coord.request(OffsetDeleteRequest(group_id=group, topics=[
            OffsetDeleteRequestTopic(name=t, partitions=[
                OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in by_topic.items()]), 0)
    finally:
        await coord.close()
    errors = [f"{t.name}-{p.partition_index}: {error_name(p.error_code)}"
              for t in r.topics for p in t.partitions if p.error_code]
    if r.error_code and error_name(r.error_code) != "GROUP_ID_NOT_FOUND":
        errors.insert(0, error_name(r.error_code))
    if errors:
        raise ConnectRestError(500, f"Failed to delete offsets of group {group}: "
                                    f"{', '.join(errors)}")
