"""Which group protocols this broker serves, and the APIs that go with them.

``group.coordinator.rebalance.protocols`` lists them (``classic`` always served).
``consumer`` off: ConsumerGroupHeartbeat/ConsumerGroupDescribe (``CONSUMER_APIS``) answer
UNSUPPORTED_VERSION and ApiVersions leaves them out. Share groups are served when
``group.share.enable`` is true and the list names ``share``; else ``SHARE_APIS`` are
treated the same way. ``hidden_apis(broker)`` is what ApiVersions leaves out.
"""

from __future__ import annotations

from typing import Any

CONSUMER_APIS = frozenset({68, 69})
SHARE_APIS = frozenset({76, 77, 78, 79, 90, 91, 92})


def _protocols(broker: Any) -> set[str]:
    return set(broker.config.get_list("group.coordinator.rebalance.protocols"))


def consumer_enabled(broker: Any) -> bool:
    return "consumer" in _protocols(broker)


def share_enabled(broker: Any) -> bool:
    return broker.config.get_bool("group.share.enable") and "share" in _protocols(broker)


def hidden_apis(broker: Any) -> frozenset[int]:
    hidden: frozenset[int] = frozenset()
    if not consumer_enabled(broker):
        hidden |= CONSUMER_APIS
    if not share_enabled(broker):
        hidden |= SHARE_APIS
    return hidden
