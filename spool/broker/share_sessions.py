"""KIP-932 share sessions: Kafka's ShareSessionCache and ShareSessionContext, in one place.

A share session belongs to one member of one share group on this broker: key
``(group_id, member_id)``. It holds the share-partitions the member fetches here
(``(topic_id, partition)``, in the order they were added), the epoch its next request
must carry, and the connection it was opened on.

Epochs (``share_session_epoch`` of ShareFetch and ShareAcknowledge), as Kafka's
``SharePartitionManager.newContext`` / ``acknowledgeSessionUpdate``:

- ``0`` (INITIAL) opens a session: a session of that key is replaced; the request's
  partitions become the session's; acknowledgements in it are INVALID_REQUEST (nothing
  was acquired in a session that does not exist yet). No room in the cache
  (``group.share.max.share.sessions``): SHARE_SESSION_LIMIT_REACHED. ShareAcknowledge
  cannot open one: INVALID_SHARE_SESSION_EPOCH.
- ``-1`` (FINAL) closes it after this request: a ShareFetch only acknowledges (nothing is
  fetched); no session: SHARE_SESSION_NOT_FOUND. The caller then ends it with ``remove``,
  which releases the member's acquired records.
- otherwise the session must exist (SHARE_SESSION_NOT_FOUND) and the epoch must be the
  one it expects (INVALID_SHARE_SESSION_EPOCH); the request's partitions are added, its
  ``forgotten_topics_data`` removed, and the expected epoch moves on (``next_epoch``:
  after 2**31-1 comes 1). ShareAcknowledge changes no partitions.

A subsequent ShareFetch fetches every partition of the session; its
answer names only partitions with records, an error, or added since the last answer
(``requires_update``), as Kafka's ``CachedSharePartition.maybeUpdateResponseData``.

Sessions end on FINAL, on a new INITIAL for the same key, or when the connection they
were opened on goes (Kafka's ConnectionDisconnectListener): the owner's ``on_close``
callback then releases the member's acquired records. Everything here runs on the
event loop; nothing is persisted (sessions do not survive a restart: clients open
a new one on SHARE_SESSION_NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from uuid import UUID

from spool.protocol.errors import Errors, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

SharePartitionKey = tuple[UUID, int]  # (topic_id, partition)
SessionKey = tuple[str, str]  # (group_id, member_id)


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ShareRequestMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    key: SessionKey
    epoch: int  # the epoch the next request must carry
    conn: object | None = None  # the connection it was opened on
    partitions: dict[SharePartitionKey, bool] = field(default_factory=dict)  # -> requires_update

    @property
    def group_id(self) -> str:
        return self.key[0]

    @property
    def member_id(self) -> str:
        return self.key[1]

    def add(self, tps: Iterable[SharePartitionKey]) -> None:
        for tp in tps:
            if tp not in self.partitions:
                self.partitions[tp] = True

    def forget(self, tps: Iterable[SharePartitionKey]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)

    def must_answer(self, tp: SharePartitionKey, has_records: bool, error: int) -> bool:
        """Whether a subsequent answer names ``tp`` (and clear its pending update)."""
        pending = self.partitions.get(tp, False)
        if tp in self.partitions:
            # an error is answered again once it is gone: the partition is marked pending
            self.partitions[tp] = error != 0
        return has_records or error != 0 or pending


class ShareSessionCache:
    """The share sessions of this broker, at most ``max_entries`` of them."""

    def __init__(self, max_entries: int,
                 on_close: Callable[[ShareSession], None] | None = None) -> None:
        self.max_entries = max_entries
        self.on_close = on_close
        self.sessions: dict[SessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def members(self, group_id: str) -> list[str]:
        return [m for g, m in self.sessions if g == group_id]

    def fetch_context(self, group_id: str, member_id: str, epoch: int,
                      partitions: list[SharePartitionKey], forgotten: list[SharePartitionKey],
                      acknowledging: bool, conn: object | None = None
                      ) -> tuple[ShareSession | None, bool]:
        """The session a ShareFetch runs in and whether it is a full (initial) request;
        (None, False) for FINAL. KafkaError for Kafka's session errors."""
        if epoch == FINAL_EPOCH:
            if self.get(group_id, member_id) is None:
                raise KafkaError(Errors.SHARE_SESSION_NOT_FOUND,
                                 "no share session for this member")
            return None, False
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise KafkaError(Errors.INVALID_REQUEST,
                                 "acknowledge data present in the initial share fetch")
            self.remove(group_id, member_id, notify=False)
            if len(self.sessions) >= self.max_entries:
                raise KafkaError(Errors.SHARE_SESSION_LIMIT_REACHED,
                                 "the share session cache is full")
            session = ShareSession((group_id, member_id), next_epoch(INITIAL_EPOCH), conn)
            session.add(partitions)
            for tp in session.partitions:
                session.partitions[tp] = False  # a full answer names them all anyway
            self.sessions[session.key] = session
            return session, True
        session = self._expected(group_id, member_id, epoch)
        session.add(partitions)
        session.forget(forgotten)
        session.epoch = next_epoch(session.epoch)
        if conn is not None:
            session.conn = conn
        return session, False

    def acknowledge_context(self, group_id: str, member_id: str, epoch: int) -> None:
        """Check (and advance) the session of a ShareAcknowledge (Kafka's
        acknowledgeSessionUpdate): INITIAL is INVALID_SHARE_SESSION_EPOCH (nothing to
        acknowledge without a session); FINAL needs the session."""
        if epoch == INITIAL_EPOCH:
            raise KafkaError(Errors.INVALID_SHARE_SESSION_EPOCH,
                             "a share acknowledge cannot open a share session")
        if epoch == FINAL_EPOCH:
            if self.get(group_id, member_id) is None:
                raise KafkaError(Errors.SHARE_SESSION_NOT_FOUND,
                                 "no share session for this member")
            return
        session = self._expected(group_id, member_id, epoch)
        session.epoch = next_epoch(session.epoch)

    def _expected(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        session = self.get(group_id, member_id)
        if session is None:
            raise KafkaError(Errors.SHARE_SESSION_NOT_FOUND, "no share session for this member")
        if session.epoch != epoch:
            raise KafkaError(Errors.INVALID_SHARE_SESSION_EPOCH,
                             f"expected share session epoch {session.epoch}, got {epoch}")
        return session

    def remove(self, group_id: str, member_id: str, *, notify: bool = True) -> ShareSession | None:
        """End a session (FINAL, or its connection went); ``on_close`` releases its
        member's records when ``notify``."""
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None and notify and self.on_close is not None:
            self.on_close(session)
        return session

    def connection_gone(self, conn: object) -> None:
        """The sessions opened on ``conn`` end (Kafka: on disconnect)."""
        for key, session in list(self.sessions.items()):
            if session.conn is conn:
                self.remove(*key)
