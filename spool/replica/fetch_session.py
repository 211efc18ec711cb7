"""The client side of a KIP-227 fetch session (Kafka's FetchSessionHandler), for a
follower's fetcher: which partitions each Fetch names, with which session metadata.

``build(wanted)`` takes every partition the next Fetch is for, ``{(topic, partition):
FetchPartition}``, and returns ``(session_id, epoch, to_send, to_forget)``:

- no session yet (or after an error): a **full** request, epoch 0 (INITIAL), with the
  session id of an existing session to replace (0: none); every wanted partition is sent.
- within a session: an **incremental** request with the session's next epoch; only
  partitions added or whose fetch parameters changed (offset, log start, leader epoch,
  bytes) are sent, and the session's partitions no longer wanted are forgotten.

``handle_response(resp)`` moves the session on: a full answer with a session id opens it
(next epoch 1), an incremental one moves the epoch on, session id 0 means the broker keeps
no session (the next request is full again). A top-level error returns False: after
FETCH_SESSION_ID_NOT_FOUND the next request opens a new session, after any other error
it replaces this one. ``reset()`` (a failed or unanswered request: what the broker holds
is unknown) makes the next request a full one replacing the session.

A partition left out of an incremental answer has nothing new: its high watermark and log
start are as last answered. Not thread-safe: one fetcher's loop.
"""

from __future__ import annotations

from typing import Any

from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from spool.protocol.errors import Errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
MAX_EPOCH = 2**31 - 1

Key = tuple[str, int]


def _params(p: FetchPartition) -> tuple:
    return (p.fetch_offset, p.log_start_offset, p.current_leader_epoch, p.partition_max_bytes,
            p.last_fetched_epoch)


def _by_topic(parts: dict[Key, FetchPartition]) -> list[FetchTopic]:
    topics: dict[str, list[FetchPartition]] = {}
    for (topic, _), p in parts.items():
        topics.setdefault(topic, []).append(p)
    return [FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()]


class FetchSessionHandler:
    """One fetcher's session with one leader (see the module docstring)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.session: dict[Key, tuple] = {}  # what the broker's session holds
        self._full = True  # the request being answered is a full one

    def build(self, wanted: dict[Key, FetchPartition]
              ) -> tuple[int, int, list[FetchTopic], list[ForgottenTopic]]:
        if self.epoch == INITIAL_EPOCH:
            self._full = True
            self.session = {k: _params(p) for k, p in wanted.items()}
            return self.session_id, INITIAL_EPOCH, _by_topic(wanted), []
        self._full = False
        session = self.session
        send: dict[Key, FetchPartition] = {}
        for key, p in wanted.items():
            params = _params(p)
            if session.get(key) != params:
                session[key] = params
                send[key] = p
        forget: dict[str, list[int]] = {}
        for key in [k for k in session if k not in wanted]:
            del session[key]
            forget.setdefault(key[0], []).append(key[1])
        return self.session_id, self.epoch, _by_topic(send), [
            ForgottenTopic(topic=t, partitions=ps) for t, ps in forget.items()]

    def handle_response(self, resp: Any) -> bool:
        if resp.error_code:
            if resp.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        if resp.session_id == INVALID_SESSION_ID:  # the broker keeps none
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif self._full:
            self.session_id, self.epoch = resp.session_id, 1
        else:
            self.epoch = 1 if self.epoch == MAX_EPOCH else self.epoch + 1
        return True

    def reset(self) -> None:
        self.epoch = INITIAL_EPOCH
