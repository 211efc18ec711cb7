"""Who runs what: the group leader's assignment of connectors and tasks to workers.

Kafka Connect's eager assignor (``EagerAssignor``), computed by the leader only:

- members are sorted by member id; one circular iterator walks them;
- each connector (sorted by name) goes to the next member, then each task (connectors
  sorted by name, tasks by number) to the next member, the iterator continuing where the
  connectors left it;
- every member gets an assignment (possibly empty) carrying the leader's id and URL and
  the config offset the assignment was computed at.

``assign(members, connectors, task_counts)`` is pure: ``members`` are member ids,
``connectors`` the connector names in the config state that are to run (not STOPPED),
``task_counts`` each connector's number of committed task configs. It answers
``{member_id: (connectors, tasks)}`` with ``tasks`` as ``herder.TaskId``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spool.connect.herder import TaskId

Assignment = tuple[list[str], list[TaskId]]


def assign(members: Iterable[str], connectors: Iterable[str],
           task_counts: Mapping[str, int]) -> dict[str, Assignment]:
    """Round-robin connectors, then tasks, over the members sorted by id (module doc)."""
    order = sorted(set(members))
    out: dict[str, Assignment] = {m: ([], []) for m in order}
    if not order:
        return out
    i = 0
    names = sorted(set(connectors))
    for name in names:
        out[order[i % len(order)]][0].append(name)
        i += 1
    for name in names:
        for n in range(task_counts.get(name, 0)):
            out[order[i % len(order)]][1].append(TaskId(name, n))
            i += 1
    return out
