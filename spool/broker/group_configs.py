"""``broker.group_configs``: a group's KIP-848/KIP-932 settings, as the coordinators read them.

``get(group_id, name)`` is the group's value of a group config key
(``spool.cluster.group_config.KEYS``: ``consumer.session.timeout.ms``,
``share.record.lock.duration.ms``, ``share.auto.offset.reset``...): the value set on the
group (a GROUP config resource, IncrementalAlterConfigs), else the broker key it falls
back to (``group.consumer.session.timeout.ms``...), else Kafka's default; an int for the
int keys, a str for the others. A name that is not a group config is a KeyError (a
programming error, not a client's). Reads the broker's current metadata view each call:
a value set on any broker of a cluster is seen by all once their metadata catches up.

``stored(group_id)`` is what the group sets itself (DescribeConfigs' GROUP_CONFIG values).
"""

from __future__ import annotations

from typing import Any

from spool.cluster import group_config
from spool.cluster.group_config import GROUP_RESOURCE


class GroupConfigs:
    """Per-group config values over a broker's metadata view and static config."""

    def __init__(self, broker: Any) -> None:
        self._broker = broker

    def stored(self, group_id: str) -> dict[str, str]:
        view = getattr(self._broker, "view", None)
        if view is None:  # before the broker started: no group has values yet
            return {}
        return view.resource_config(GROUP_RESOURCE, group_id)

    def get(self, group_id: str, name: str) -> int | str:
        return group_config.effective(name, self.stored(group_id), self._broker.config.get)

    def broker_value(self, name: str) -> int | str:
        """The value of ``name`` for a group that does not set it."""
        return group_config.broker_value(name, self._broker.config.get)
