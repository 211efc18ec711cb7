"""Fetch from the closest replica (KIP-392): which replica a consumer should read from.

``replica.selector.class`` names the broker's selector, by Kafka's class names:

- unset or empty: none; the leader never points a consumer elsewhere (Kafka's default);
- ``org.apache.kafka.common.replica.RackAwareReplicaSelector`` (``RACK_AWARE``): Kafka's
  rack-aware selector, below. Any other name is a configuration error at start (Kafka
  fails to load the class); ``check_selector_class`` says so.

The leader of a partition answers a consumer's Fetch (v11+, which carries the client's
``rack_id``) with ``preferred_read_replica`` = ``preferred_read_replica(...)`` when that
is not -1, and no records; the consumer then fetches from that replica, which serves
consumers up to its own high watermark.

Rack-aware choice (Kafka's ``ReplicaManager.findPreferredReadReplica`` and
``RackAwareReplicaSelector.select``), for a fetch at ``fetch_offset``:

- candidates: the leader, and every follower in the ISR whose log end offset (as its
  last Fetch said) is at or past ``fetch_offset`` (a lagging or unknown follower is
  never chosen: it could not serve the offset);
- a client without a rack, or no candidate in its rack: the leader;
- the leader in the client's rack: the leader;
- else the candidate in the client's rack with the highest log end offset, ties to
  the one caught up most recently, then the lowest id (Kafka leaves that tie to set
  order);
- the leader chosen means -1 (the leader serves the fetch itself), as Kafka never sends
  the leader as preferred read replica.

Pure: the caller passes the partition's state, the racks, and the time.
"""

from __future__ import annotations

from collections.abc import Callable

from spool.replica.partition import Partition

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = frozenset({RACK_AWARE})
NONE = -1


def check_selector_class(name: str | None) -> str | None:
    """The selector ``replica.selector.class`` names (None: none); ValueError if unknown."""
    if name is None or not name.strip():
        return None
    if name.strip() not in SELECTORS:
        raise ValueError(f"replica.selector.class: class {name.strip()} cannot be found "
                         f"(Spool has {RACK_AWARE})")
    return name.strip()


def preferred_read_replica(part: Partition, fetch_offset: int, client_rack: str | None,
                           rack_of: Callable[[int], str | None], now_ms: int) -> int:
    """The replica a consumer in ``client_rack`` should fetch ``fetch_offset`` of ``part``
    from (``part`` is led here), or -1 for the leader (module doc)."""
    if not client_rack:
        return NONE
    if rack_of(part.node_id) == client_rack:
        return NONE
    best: tuple[int, int, int] | None = None  # (LEO, -time since caught up, -id)
    for rid, state in part.followers.items():
        if rid not in part.isr or rack_of(rid) != client_rack:
            continue
        if state.log_end_offset < fetch_offset:
            continue
        key = (state.log_end_offset, -(now_ms - state.last_caught_up_ms), -rid)
        if best is None or key > best:
            best = key
    return NONE if best is None else -best[2]
