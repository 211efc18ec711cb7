"""KIP-227 fetch sessions: Kafka's FetchSessionCache, FetchSession and FetchContexts.

A fetch session lets a client (a consumer or a follower) stop naming every partition in
every Fetch: the broker keeps the partitions and their fetch parameters, the request names
only what changed, and the answer only the partitions with something new.

Request metadata (``session_id``, ``session_epoch``, Fetch v7+), as Kafka's
``FetchManager.newContext``:

- below v7, or epoch ``-1`` (FINAL) with session id 0: **sessionless**, the answer carries
  every requested partition and ``session_id`` 0 (librdkafka always asks this way).
  Epoch -1 with a session id closes that session first.
- epoch ``0`` (INITIAL): a **full** request. A session of the given id (if any) is closed;
  after the read a new session holding the request's partitions is created when the cache
  has room (below), and its id answered; no room: ``session_id`` 0 (the client goes on
  with full requests). The answer carries every requested partition.
- any other epoch: an **incremental** request of session ``session_id``. Unknown id:
  FETCH_SESSION_ID_NOT_FOUND (70); an epoch other than the one the session expects:
  INVALID_FETCH_SESSION_EPOCH (71); a session made with topic IDs (v13+) asked below v13,
  or the other way round: FETCH_SESSION_TOPIC_ID_ERROR (106). These are top-level errors
  with no partitions and ``session_id`` 0. Otherwise the request's partitions are added to
  the session or replace their fetch parameters, ``forgotten_topics_data`` leaves it, and
  the expected epoch moves on (after 2**31-1 comes 1). A session left empty is closed and
  the request answered sessionless. The read covers every partition of the session, in the
  session's order; the answer names a partition only when it has records, an error, a
  preferred read replica, or a high watermark or log start offset other than the one last
  answered for it (Kafka's ``CachedPartition.maybeUpdateResponseData``; an error forgets
  the high watermark, so the partition is answered again once the error is gone). A
  partition answered with records moves to the end of the session's order, so that
  ``max_bytes`` does not starve the partitions behind it.

Partitions are keyed by (topic name, partition) below v13 and (topic ID, partition) from
v13 on; a topic ID's name is looked up again at every request (an unknown ID is answered
UNKNOWN_TOPIC_ID each time, as Kafka).

The cache (``max.incremental.fetch.session.cache.slots`` sessions, Kafka's default 1000;
0 disables sessions) evicts as Kafka's ``FetchSessionCache.tryEvict`` when a new session
finds it full: the least recently used session if unused for ``EVICTION_MS`` (2 minutes,
fixed in Kafka too); otherwise the least valuable evictable session, ordered by
(privileged, partitions, id), if the new one is worth more (privileged = a follower's). A
session is evictable by anyone once older than ``EVICTION_MS``, and by a follower's new
session at once unless it is itself a follower's. (Kafka records evictability when a session
is used; here it is computed when a victim is sought: the same rule, judged by the present.)

Sessions do not survive a restart and are not tied to a connection (a client may change
connection and keep its session). Everything runs on the event loop.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from spool.protocol._generated import FetchRequest
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol.errors import Errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
EVICTION_MS = 120_000  # Kafka's FetchSessionCache evictionMs
SESSIONS_VERSION = 7
TOPIC_IDS_VERSION = 13

Key = tuple[Any, int]  # (topic name below v13, else topic ID; partition)


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


class CachedPartition:
    """A partition of a session: its latest fetch parameters (the request's FetchPartition)
    and the high watermark and log start offset last answered for it (-1: none yet)."""

    __slots__ = ("topic", "topic_id", "fetch", "high_watermark", "log_start_offset")

    def __init__(self, topic: str | None, topic_id: UUID, fetch: FetchPartition,
                 high_watermark: int = -1, log_start_offset: int = -1) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.fetch = fetch
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset


class FetchSession:
    """One client's session: its partitions in order, and the epoch its next request must
    carry."""

    def __init__(self, session_id: int, privileged: bool, uses_topic_ids: bool,
                 partitions: dict[Key, CachedPartition], now_ms: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.partitions = partitions
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)

    def __len__(self) -> int:
        return len(self.partitions)

    def update(self, topics: Iterable[FetchTopic], forgotten: Iterable[Any]) -> None:
        """Add or update the request's partitions, then drop the forgotten ones (Kafka's
        FetchSession.update)."""
        parts = self.partitions
        by_id = self.uses_topic_ids
        for t in topics:
            tkey = t.topic_id if by_id else t.topic
            for p in t.partitions:
                cached = parts.get((tkey, p.partition))
                if cached is None:
                    parts[(tkey, p.partition)] = CachedPartition(t.topic, t.topic_id, p)
                else:
                    cached.fetch = p
        for f in forgotten:
            tkey = f.topic_id if by_id else f.topic
            for index in f.partitions:
                parts.pop((tkey, index), None)

    def fetch_topics(self) -> list[FetchTopic]:
        """The session's partitions as request topics, in the session's order (consecutive
        partitions of one topic share an entry, as Kafka's FetchResponse.of groups them)."""
        out: list[FetchTopic] = []
        last_key: object = None
        current: list[FetchPartition] = []
        for (tkey, _), cached in self.partitions.items():
            if tkey != last_key or not out:
                current = []
                out.append(FetchTopic(topic=cached.topic, topic_id=cached.topic_id,
                                      partitions=current))
                last_key = tkey
            current.append(cached.fetch)
        return out


class FetchSessionCache:
    """The broker's sessions (see the module docstring for the eviction rule)."""

    def __init__(self, max_entries: int, eviction_ms: int = EVICTION_MS,
                 rng: Callable[[int, int], int] | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self._randint = rng or random.randint

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def num_partitions(self) -> int:
        """Partitions held by all sessions (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(s) for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms

    def maybe_create(self, now_ms: int, privileged: bool, uses_topic_ids: bool,
                     partitions: dict[Key, CachedPartition]) -> int:
        """A new session of these partitions if there is room (or room can be made): its
        id; else INVALID_SESSION_ID."""
        if self.max_entries <= 0:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_entries and not self._try_evict(
                privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        sid = self._randint(1, MAX_EPOCH)
        while sid in self.sessions:
            sid = self._randint(1, MAX_EPOCH)
        self.sessions[sid] = FetchSession(sid, privileged, uses_topic_ids, partitions, now_ms)
        return sid

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            victim = stale
        else:
            old = [s for s in self.sessions.values()
                   if now_ms - s.creation_ms > self.eviction_ms
                   or (privileged and not s.privileged)]
            if not old:
                return False
            victim = min(old, key=lambda s: (s.privileged, len(s), s.id))
            if (privileged, size, 0) < (victim.privileged, len(victim), victim.id):
                return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True


def _key(t: FetchTopic, by_id: bool) -> Any:
    return t.topic_id if by_id else t.topic


class FetchContext:
    """What one Fetch request reads and how its answer is made (Kafka's FetchContext).

    ``error``: a top-level error (answered at once, nothing read); else ``topics`` are the
    partitions to read (the request's, or the session's for an incremental request) and
    ``respond(responses, now_ms)`` turns the read into ``(session_id, responses)``."""

    error = 0
    session_id = INVALID_SESSION_ID

    def __init__(self, topics: list[FetchTopic]) -> None:
        self.topics = topics

    def respond(self, responses: list, now_ms: int) -> tuple[int, list]:
        return self.session_id, responses


class SessionError(FetchContext):
    def __init__(self, code: int) -> None:
        super().__init__([])
        self.error = code


class FullContext(FetchContext):
    """A full request that creates a session after the read, if the cache has room."""

    def __init__(self, cache: FetchSessionCache, topics: list[FetchTopic], by_id: bool,
                 privileged: bool) -> None:
        super().__init__(topics)
        self.cache = cache
        self.by_id = by_id
        self.privileged = privileged

    def respond(self, responses: list, now_ms: int) -> tuple[int, list]:
        parts: dict[Key, CachedPartition] = {}
        by_id = self.by_id
        for t, r in zip(self.topics, responses, strict=True):
            tkey = _key(t, by_id)
            for p, pd in zip(t.partitions, r.partitions, strict=True):
                parts[(tkey, p.partition)] = CachedPartition(
                    t.topic, t.topic_id, p, pd.high_watermark, pd.log_start_offset)
        sid = self.cache.maybe_create(now_ms, self.privileged, by_id, parts)
        return sid, responses


class IncrementalContext(FetchContext):
    """An incremental request: reads the whole session, answers what changed."""

    def __init__(self, session: FetchSession) -> None:
        super().__init__(session.fetch_topics())
        self.session = session
        self.session_id = session.id

    def respond(self, responses: list, now_ms: int) -> tuple[int, list]:
        session = self.session
        parts = session.partitions
        by_id = session.uses_topic_ids
        out = []
        moved: list[Key] = []
        for t, r in zip(self.topics, responses, strict=True):
            tkey = _key(t, by_id)
            kept = []
            for pd in r.partitions:
                key = (tkey, pd.partition_index)
                cached = parts.get(key)
                if cached is None:  # forgotten meanwhile by a later request: answer it
                    kept.append(pd)
                    continue
                must = False
                if pd.records:
                    must = True
                    moved.append(key)
                if cached.high_watermark != pd.high_watermark:
                    must = True
                    cached.high_watermark = pd.high_watermark
                if cached.log_start_offset != pd.log_start_offset:
                    must = True
                    cached.log_start_offset = pd.log_start_offset
                if pd.preferred_read_replica >= 0:
                    must = True
                if pd.error_code:
                    must = True
                    cached.high_watermark = -1
                if must:
                    kept.append(pd)
            if kept:
                r.partitions = kept
                out.append(r)
        for key in moved:  # partitions that got records go last (fairness)
            parts[key] = parts.pop(key)
        return session.id, out


def new_context(cache: FetchSessionCache, version: int, req: FetchRequest,
                privileged: bool, now_ms: int) -> FetchContext:
    """The context of one Fetch request (the module docstring)."""
    topics = req.topics
    if version < SESSIONS_VERSION:
        return FetchContext(topics)
    sid, epoch = req.session_id, req.session_epoch
    by_id = version >= TOPIC_IDS_VERSION
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if sid != INVALID_SESSION_ID:
            cache.remove(sid)
        if epoch == FINAL_EPOCH:
            return FetchContext(topics)
        return FullContext(cache, topics, by_id, privileged)
    session = cache.get(sid)
    if session is None:
        return SessionError(Errors.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return SessionError(Errors.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != by_id:
        return SessionError(Errors.FETCH_SESSION_TOPIC_ID_ERROR)
    session.update(topics, req.forgotten_topics_data)
    if not session.partitions:
        cache.remove(sid)
        return FetchContext(topics)
    cache.touch(session, now_ms)
    session.epoch = next_epoch(session.epoch)
    return IncrementalContext(session)
