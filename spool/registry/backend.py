"""``KafkaRegistry``: ``model.Registry`` over the ``_schemas`` topic of a Kafka cluster.

``KafkaRegistry(client_config, url, group_id=..., topic=...)``; ``await start()``
creates the topic when missing (``schemas_log.ensure_topic``), reads it from offset 0
into a ``store.Store`` (``schemas_log.SchemasTail``) up to the end it had when starting
(until then every call waits, up to ``timeout``, then 50002), then joins the election
(``election.Election``). A ``start()`` that failed (``RegistryError``: the cluster did
not answer within ``timeout``) may be called again. ``await stop()`` leaves the group
(another instance takes over at once) and closes the clients.

Reads are ``core.Core``'s over this instance's store. On an instance that is not the
primary a read first catches up with the topic (reads up to the end offset it has now:
one ListOffsets, ~1 ms), so it sees every write committed through any instance before
the request; a cluster that does not answer within 1 s leaves it the local copy. The
primary has applied every write before answering it, so it answers at once.

Writes go to the primary:
- this instance is the primary once assigned the group's partition 0 *and* promoted:
  its transactional producer (``transactional.id`` = the group id) has fenced any older
  one, and the NOOP record it then wrote has been read back, so its store holds every
  write before its own. Its writes are ``Core``'s, one at a time (a lock: ids and
  versions are computed from the store), each a transaction whose records are applied
  to the store before the call returns (read-your-writes). A producer fenced meanwhile
  (a newer primary) makes the write go to the new primary instead; a write that fails
  otherwise (50001, 50002 on a timeout) has the primary start over with a new producer.
- another instance forwards the call to the primary's URL (``forward.Forwarder``): the
  one the last primary announced on the topic (``schemas_log.PRIMARY_HEADER``, on the
  NOOP it wrote once it had fenced its predecessor), or when none was read (compacted
  away: the NOOP is a tombstone) the group's member holding partition 0, asked of the
  group coordinator over Spool's own client (``election.Election.primary_url``: not
  librdkafka's DescribeConsumerGroups, which can abort the process when the coordinator
  moves mid-call, librdkafka #4605), logged when it changes. It then catches up with the
  topic before returning
  (read-your-writes here too). A forward still unanswered when another instance has
  become the primary (the old one paused, say) is given up and sent to the new one. A
  primary not yet elected or not reachable is retried until ``write_timeout`` (30 s: a
  killed primary's session times out in 6 s), then 50003.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from spool.registry.core import Core
from spool.registry.election import Election
from spool.registry.forward import Forwarder, Unreachable
from spool.registry.model import (
    SCHEMAS_TOPIC,
    Compatibility,
    Reference,
    RegistryError,
    SchemaVersion,
    forward_error,
    operation_timeout,
)
from spool.registry.schemas_log import (
    Fenced,
    Record,
    SchemasTail,
    SchemasWriter,
    client_config,
    ensure_topic,
)
from spool.registry.store import Store, noop_record

log = logging.getLogger("spool.registry")

DEFAULT_GROUP_ID = "schema-registry"
T = TypeVar("T")


class NotPrimary(Exception):
    """This instance may not write (any more): the write goes to the primary."""


class _PrimaryMoved(Exception):
    """Another instance became the primary while a write was forwarded."""


class KafkaRegistry:
    """The registry over Kafka (module doc)."""

    def __init__(self, config: dict[str, Any], url: str, *,
                 group_id: str = DEFAULT_GROUP_ID, topic: str = SCHEMAS_TOPIC,
                 timeout: float = 10.0, write_timeout: float = 30.0,
                 session_timeout_ms: int = 6000) -> None:
        self.config = dict(config)
        self.url = url
        self.group_id = group_id
        self.topic = topic
        self.timeout = timeout
        self.write_timeout = write_timeout
        self.store = Store()
        self.core = Core(self.store, self._append)
        self._admin = AdminClient(client_config(self.config))
        self.tail = SchemasTail(self.config, topic, self.store.apply, self._admin)
        self.election = Election(self.config, topic, group_id, url, self._primary_changed,
                                 session_timeout_ms=session_timeout_ms, admin=self._admin)
        self.forwarder = Forwarder(write_timeout)
        self._ready = asyncio.Event()
        self._writable = asyncio.Event()  # promoted: the writer below may write
        self._writer: SchemasWriter | None = None
        self._promotion: asyncio.Task[None] | None = None
        self._term = 0  # bumped on every change of primacy
        self._lock = asyncio.Lock()
        self._started = False
        self._group_primary: str | None = None  # the last primary_url() found (logged)
        self._promotion_error = ""  # why this instance, assigned the partition, cannot write

    @property
    def is_primary(self) -> bool:
        return self._writable.is_set()

    # ---- lifecycle

    async def start(self) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                await asyncio.to_thread(ensure_topic, self._admin, self.topic,
                                        max(1.0, deadline - time.monotonic()))
                break
            except (KafkaException, TimeoutError) as e:
                if time.monotonic() >= deadline:
                    raise operation_timeout(f"creating {self.topic}: "
                                            f"{e or 'timed out'}") from None
                await asyncio.sleep(0.2)
        if not self._started:
            self._started = True
            self.tail.start()
        await self.tail.catch_up(max(1.0, deadline - time.monotonic()))
        if not self._ready.is_set():
            self._ready.set()
            log.info("registry %s read %s up to offset %d", self.url, self.topic,
                     self.tail.position)
            self.election.start()

    async def stop(self) -> None:
        self._term += 1
        self._writable.clear()
        if self._promotion is not None:
            self._promotion.cancel()
        if self._started:
            await asyncio.to_thread(self.election.close)
            await asyncio.to_thread(self.tail.close)
        await self._drop_writer()
        await self.forwarder.close()

    # ---- primacy

    def _primary_changed(self, primary: bool) -> None:
        self._term += 1
        self._writable.clear()
        if self._promotion is not None:
            self._promotion.cancel()
            self._promotion = None
        if primary:
            self._promotion = asyncio.get_running_loop().create_task(self._promote(self._term))
        else:
            asyncio.get_running_loop().create_task(self._drop_writer())

    async def _promote(self, term: int) -> None:
        """Fence the previous primary, read everything it wrote, then write."""
        await self._drop_writer()
        while term == self._term:
            writer = SchemasWriter(self.config, self.topic, self.group_id, self.timeout)
            try:
                await writer.open()
                offset = await writer.write([noop_record()], announce=self.url)
                await self.tail.wait_for(offset, self.timeout)
            except asyncio.CancelledError:
                writer.close()
                raise
            except Exception as e:  # RegistryError, Fenced, a client that failed
                writer.close()
                log.warning("registry %s could not become the primary: %s", self.url, e)
                self._promotion_error = f" (this instance could not become it: {e})"
                await asyncio.sleep(1.0)
                continue
            if term != self._term:
                writer.close()
                return
            self._writer = writer
            self._promotion_error = ""
            self._writable.set()
            log.info("registry %s writes %s (read up to offset %d)", self.url, self.topic,
                     self.tail.position)
            return

    async def _drop_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            await asyncio.to_thread(writer.close)

    async def _append(self, records: list[Record]) -> None:
        """Core's way to the log: one transaction, applied here when this returns."""
        writer = self._writer
        if writer is None or not self._writable.is_set():
            raise NotPrimary
        try:
            offset = await writer.write(records)
        except Fenced as e:
            log.warning("registry %s was fenced (%s): another instance is the primary",
                        self.url, e)
            if self._writer is writer:
                self._term += 1
                self._writable.clear()
                await self._drop_writer()
            raise NotPrimary from None
        except RegistryError:
            # a transaction that failed (broker away, timed out) may leave the producer
            # unable to begin another: a new one takes over, fencing this one
            if self._writer is writer:
                self._primary_changed(self.election.is_primary)
            raise
        await self.tail.wait_for(offset, self.timeout)

    # ---- how calls are served

    async def _when_ready(self) -> None:
        if not self._ready.is_set():
            try:
                await asyncio.wait_for(self._ready.wait(), self.timeout)
            except TimeoutError:
                raise operation_timeout(f"{self.topic} is still being read") from None

    async def _read(self, call: Callable[[], Awaitable[T]]) -> T:
        await self._when_ready()
        if not self.is_primary:  # the primary applied every write before answering it
            with contextlib.suppress(RegistryError):  # no answer in 1 s: the local copy
                await self.tail.catch_up(1.0)
        return await call()

    async def _write(self, local: Callable[[], Awaitable[T]],
                     forward: Callable[[str], Awaitable[T]]) -> T:
        await self._when_ready()
        deadline = time.monotonic() + self.write_timeout
        last: RegistryError | None = None
        while True:
            left = deadline - time.monotonic()
            if self.election.is_primary:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._writable.wait(), min(0.5, max(0.0, left)))
                async with self._lock:
                    if self._writable.is_set():
                        try:
                            return await local()
                        except NotPrimary:
                            pass
            else:
                url = await self._primary_url(left)
                if url and url != self.url:
                    try:
                        result = await self._forward(url, forward)
                    except Unreachable as e:  # killed, and its session not yet over
                        last = e
                    except _PrimaryMoved:  # to the new one, after the deadline check
                        pass
                    else:
                        await self.tail.catch_up(max(1.0, deadline - time.monotonic()))
                        return result
            if time.monotonic() >= deadline:
                stuck = self._promotion_error if self.election.is_primary else ""
                raise last or forward_error(f"no primary registry within "
                                            f"{self.write_timeout:g} s{stuck}")
            await asyncio.sleep(0.1)

    async def _forward(self, url: str, forward: Callable[[str], Awaitable[T]]) -> T:
        """``forward(url)``, given up (``_PrimaryMoved``) if another instance becomes the
        primary meanwhile: a paused primary accepts connections and answers nothing,
        and once it is fenced it can write nothing either."""
        call = asyncio.ensure_future(forward(url))
        watch = asyncio.ensure_future(self._moved_from(url))
        try:
            await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not call.done():
                call.cancel()
        if call.done() and not call.cancelled():
            return call.result()
        raise _PrimaryMoved

    async def _primary_url(self, left: float) -> str | None:
        """The primary's URL: the last one announced on the topic, else (none read: the
        announcement compacted away long after it was written) the group's word."""
        if self.tail.announced is not None:
            return self.tail.announced
        url = await self.election.primary_url(min(5.0, max(0.5, left)))
        if url is not None and url != self._group_primary:
            self._group_primary = url
            log.info("no primary announced on %s: group %s says %s is the primary", self.topic,
                     self.group_id, url)
        return url

    async def _moved_from(self, url: str) -> None:
        """Return once ``url`` is no longer the primary's (checked every 0.2 s)."""
        while True:
            await asyncio.sleep(0.2)
            if self.election.is_primary or self.tail.announced not in (None, url):
                return

    # ---- model.Registry: reads

    async def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return await self._read(lambda: self.core.subjects(deleted, prefix))

    async def versions(self, subject: str, deleted: bool = False) -> list[int]:
        return await self._read(lambda: self.core.versions(subject, deleted))

    async def version(self, subject: str, version: int | str,
                      deleted: bool = False) -> SchemaVersion:
        return await self._read(lambda: self.core.version(subject, version, deleted))

    async def by_id(self, schema_id: int) -> SchemaVersion:
        return await self._read(lambda: self.core.by_id(schema_id))

    async def subject_versions_of_id(self, schema_id: int,
                                     deleted: bool = False) -> list[tuple[str, int]]:
        return await self._read(lambda: self.core.subject_versions_of_id(schema_id, deleted))

    async def referenced_by(self, subject: str, version: int | str) -> list[int]:
        return await self._read(lambda: self.core.referenced_by(subject, version))

    async def lookup(self, subject: str, schema: str, schema_type: str,
                     references: list[Reference], deleted: bool = False) -> SchemaVersion:
        return await self._read(
            lambda: self.core.lookup(subject, schema, schema_type, references, deleted))

    async def check(self, subject: str, version: int | str | None, schema: str,
                    schema_type: str, references: list[Reference]) -> Compatibility:
        return await self._read(
            lambda: self.core.check(subject, version, schema, schema_type, references))

    async def get_config(self, subject: str | None, default_to_global: bool = False) -> str:
        return await self._read(lambda: self.core.get_config(subject, default_to_global))

    async def get_mode(self, subject: str | None, default_to_global: bool = False) -> str:
        return await self._read(lambda: self.core.get_mode(subject, default_to_global))

    # ---- model.Registry: writes

    async def register(self, subject: str, schema: str, schema_type: str,
                       references: list[Reference], schema_id: int | None = None,
                       version: int | None = None) -> int:
        return await self._write(
            lambda: self.core.register(subject, schema, schema_type, references, schema_id,
                                       version),
            lambda url: self.forwarder.register(url, subject, schema, schema_type, references,
                                                schema_id, version))

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        return await self._write(
            lambda: self.core.delete_subject(subject, permanent),
            lambda url: self.forwarder.delete_subject(url, subject, permanent))

    async def delete_version(self, subject: str, version: int | str,
                             permanent: bool = False) -> int:
        return await self._write(
            lambda: self.core.delete_version(subject, version, permanent),
            lambda url: self.forwarder.delete_version(url, subject, version, permanent))

    async def set_config(self, subject: str | None, level: str) -> str:
        return await self._write(lambda: self.core.set_config(subject, level),
                                 lambda url: self.forwarder.set_config(url, subject, level))

    async def delete_config(self, subject: str | None) -> str:
        return await self._write(lambda: self.core.delete_config(subject),
                                 lambda url: self.forwarder.delete_config(url, subject))

    async def set_mode(self, subject: str | None, mode: str, force: bool = False) -> str:
        return await self._write(lambda: self.core.set_mode(subject, mode, force),
                                 lambda url: self.forwarder.set_mode(url, subject, mode, force))

    async def delete_mode(self, subject: str | None) -> str:
        return await self._write(lambda: self.core.delete_mode(subject),
                                 lambda url: self.forwarder.delete_mode(url, subject))
