"""Who writes ``_schemas``: the member of a consumer group that is assigned partition 0.

``Election(client_config, topic, group_id, url, on_change)`` joins ``group_id``
subscribed to ``topic`` with a confluent-kafka consumer whose ``client.id`` is this
instance's advertised URL, polled on a thread of its own (it reads nothing: the
partitions it is assigned are paused). Every instance of a registry joins the same
group; the group coordinator assigns the topic's one partition to one member, and that
member is the primary, as in Confluent's and Karapace's registries. The assignment is
cooperative-sticky: instances joining or leaving leave the primary where it is. A member
that stops
heartbeating (killed) leaves the group after ``session.timeout.ms`` (6 s, the broker's
minimum by default) and the partition goes to another.

``is_primary`` is this instance's view; ``on_change(is_primary)`` is called on the event
loop that called ``start()`` whenever it changes. ``primary_url()`` asks the group
coordinator which member holds partition 0 and returns its ``client.id``, or None while
no member does (a rebalance) or the question fails (the caller asks again). It asks over
Spool's own client (``group_wire.partition_holder``: FindCoordinator, DescribeGroups),
not librdkafka's DescribeConsumerGroups, which can abort the process when the
coordinator moves during the call (librdkafka #4605, seen here with a broker of three
killed); only a configuration whose security ``group_wire.wire_security`` cannot map
(said once in the log, at start) keeps librdkafka's call. The backend asks it only when
no primary has announced itself on the topic.

Being assigned the partition is what makes a primary *want* to write; what makes writing
safe is the transactional producer's fencing (``schemas_log.SchemasWriter``): two
instances that both believe they are primary for a while cannot both commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from spool.registry.group_wire import (
    GroupWireError,
    bootstrap_addresses,
    partition_holder,
    wire_security,
)
from spool.registry.schemas_log import client_config
from spool.security.client_config import ClientConfigError

log = logging.getLogger("spool.registry")


class Election:
    """This instance's membership in the registry's group (module doc)."""

    def __init__(self, config: dict[str, Any], topic: str, group_id: str, url: str,
                 on_change: Callable[[bool], None], *, session_timeout_ms: int = 6000,
                 admin: AdminClient | None = None) -> None:
        self.topic = topic
        self.group_id = group_id
        self.url = url
        self.is_primary = False
        self._held: set[tuple[str, int]] = set()  # the group thread's
        self._on_change = on_change
        self._consumer = Consumer(client_config(
            config, **{"group.id": group_id, "client.id": url, "enable.auto.commit": False,
                       "auto.offset.reset": "latest",
                       # a member joining or leaving moves no partition it need not: the
                       # primary stays the primary while others come and go
                       "partition.assignment.strategy": "cooperative-sticky",
                       "session.timeout.ms": session_timeout_ms,
                       "heartbeat.interval.ms": max(100, session_timeout_ms // 6)}))
        try:
            self._wire = (bootstrap_addresses(config), wire_security(config))
        except ClientConfigError as e:
            self._wire = None
            log.info("group %s is described through librdkafka's admin client: Spool's "
                     "client cannot use the configuration's %s", group_id, e)
        self._admin = admin
        if admin is None and self._wire is None:
            self._admin = AdminClient(client_config(config))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spool-registry-election",
                                        daemon=True)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._consumer.subscribe([self.topic], on_assign=self._assigned,
                                 on_revoke=self._revoked, on_lost=self._revoked)
        self._thread.start()

    async def primary_url(self, timeout: float = 5.0) -> str | None:
        """The advertised URL of the member holding partition 0 now, if any."""
        if self._wire is None:
            return await self._described(timeout)
        addresses, security = self._wire
        try:
            return await partition_holder(addresses, security, self.group_id, self.topic, 0,
                                          timeout=timeout)
        except GroupWireError as e:  # refused (an ACL...): said, and asked again
            log.info("describing group %s: %s", self.group_id, e)
            return None

    async def _described(self, timeout: float) -> str | None:
        """``primary_url`` through librdkafka (a configuration group_wire cannot map)."""
        assert self._admin is not None

        def describe() -> str | None:
            futures = self._admin.describe_consumer_groups([self.group_id],
                                                           request_timeout=timeout)
            group = futures[self.group_id].result(timeout)
            for member in group.members:
                assignment = member.assignment.topic_partitions if member.assignment else []
                if any(tp.topic == self.topic and tp.partition == 0 for tp in assignment):
                    return member.client_id
            return None

        try:
            return await asyncio.to_thread(describe)
        except (KafkaException, TimeoutError) as e:  # a coordinator moving, a node down
            log.info("describing group %s: %s", self.group_id, e or "timed out")  # retried
            return None

    def close(self) -> None:
        """Leave the group (the partition goes to another member at once)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10.0)
        with contextlib.suppress(Exception):
            self._consumer.close()

    # ---- the group's thread

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._consumer.poll(0.2)  # callbacks, heartbeats; nothing is fetched
            except (KafkaException, RuntimeError) as e:
                if self._stop.is_set():
                    return
                log.warning("group %s: %s", self.group_id, e)
        # close here, on the thread that polled: the revoke callback runs during it
        with contextlib.suppress(Exception):
            self._consumer.close()

    def _assigned(self, consumer: Consumer, partitions: list[Any]) -> None:
        # cooperative-sticky: ``partitions`` are the ones added to what this member holds
        consumer.incremental_assign(partitions)
        if partitions:
            consumer.pause(partitions)
        self._held |= {(tp.topic, tp.partition) for tp in partitions}
        self._notify((self.topic, 0) in self._held)

    def _revoked(self, consumer: Consumer, partitions: list[Any]) -> None:
        self._held -= {(tp.topic, tp.partition) for tp in partitions}
        with contextlib.suppress(KafkaException):
            consumer.incremental_unassign(partitions)
        self._notify((self.topic, 0) in self._held)

    def _notify(self, primary: bool) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: we are stopping
                self._loop.call_soon_threadsafe(self._set, primary)

    def _set(self, primary: bool) -> None:
        if primary != self.is_primary:
            self.is_primary = primary
            log.info("registry %s is %s", self.url,
                     "the primary" if primary else "not the primary")
            self._on_change(primary)
