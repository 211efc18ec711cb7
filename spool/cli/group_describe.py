"""``spool groups describe`` of consumer-protocol (KIP-848) and share (KIP-932) groups.

- ``await probe(admin, group, timeout)``: which kind the group is, asked of its
  coordinator: ("consumer", DescribedGroup, coordinator) from ConsumerGroupDescribe,
  ("share", (DescribedGroup, start offsets), coordinator) from ShareGroupDescribe and
  DescribeShareGroupOffsets, else ("classic", None, coordinator) (a classic group, an
  unknown one, or a broker without those APIs: the classic path of ``spool.cli.groups``
  describes it). ``coordinator`` is ``{"id", "host", "port"}`` (FindCoordinator's).
- ``consumer_doc`` / ``share_doc``: the JSON document (``spool.cli.groups``' docstring).
- ``in_flight(endpoints, group, timeout)``: the share group's in-flight records, from
  each broker admin endpoint's ``GET /share-partitions?group=`` (``spool.broker.admin_http``),
  by topic and partition; an endpoint that does not answer fails the command.
- ``show_consumer`` / ``show_share``: print the document (``--json``) or tables.
"""

from __future__ import annotations

import json as jsonlib
import time
import urllib.parse
import urllib.request
from typing import Any

from spool.cli import group_wire
from spool.cli.common import CliError, print_json, print_table
from spool.cli.wire import WireAdmin


async def probe(admin: WireAdmin, group: str, timeout: float) -> tuple[str, Any, dict]:
    coord = await group_wire.coordinator(admin, group, timeout)
    host, _, port = coord.address.rpartition(":")
    where = {"id": coord.node_id, "host": host, "port": int(port)}
    try:
        described = await group_wire.describe_consumer_group(coord, group)
        if described is not None:
            return "consumer", described, where
        described = await group_wire.describe_share_group(coord, group)
        if described is not None:
            return "share", (described, await group_wire.share_group_offsets(coord, group)), where
        return "classic", None, where
    finally:
        await coord.client.close()


def _partitions(assignment: Any) -> list[dict]:
    return sorted(({"topic": t.topic_name, "partition": p}
                   for t in assignment.topic_partitions for p in t.partitions),
                  key=lambda a: (a["topic"], a["partition"]))


def consumer_doc(g: Any) -> dict:
    members = [{
        "member_id": m.member_id, "instance_id": m.instance_id, "rack": m.rack_id,
        "member_epoch": m.member_epoch, "client_id": m.client_id, "host": m.client_host,
        "subscribed_topics": sorted(m.subscribed_topic_names),
        "subscribed_regex": m.subscribed_topic_regex,
        "assignment": _partitions(m.assignment),
        "target_assignment": _partitions(m.target_assignment),
    } for m in sorted(g.members, key=lambda m: m.member_id)]
    return {"group": g.group_id, "type": "consumer", "state": g.group_state,
            "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignor": g.assignor_name, "members": members, "offsets": []}


def share_doc(g: Any, offsets: list[tuple[str, int, int, int]]) -> dict:
    members = [{
        "member_id": m.member_id, "rack": m.rack_id, "member_epoch": m.member_epoch,
        "client_id": m.client_id, "host": m.client_host,
        "subscribed_topics": sorted(m.subscribed_topic_names),
        "assignment": _partitions(m.assignment),
    } for m in sorted(g.members, key=lambda m: m.member_id)]
    return {"group": g.group_id, "type": "share", "state": g.group_state,
            "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignor": g.assignor_name, "members": members,
            "start_offsets": [{"topic": t, "partition": p, "start_offset": None if o < 0 else o,
                               "lag": None if lag < 0 else lag} for t, p, o, lag in offsets],
            "in_flight": None}


def in_flight(endpoints: list[str], group: str, timeout: float) -> list[dict]:
    out: list[dict] = []
    query = urllib.parse.urlencode({"group": group})
    for endpoint in endpoints:
        url = f"http://{endpoint}/share-partitions?{query}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310
                out += jsonlib.loads(resp.read())
        except (OSError, ValueError) as e:
            raise CliError(f"cannot read the admin endpoint {endpoint}: {e}") from None
    return sorted(out, key=lambda p: (p["topic"], p["partition"]))


def short(parts: list[dict]) -> str:
    by_topic: dict[str, list[int]] = {}
    for a in parts:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items())) or "-"


def _dash(v: Any) -> Any:
    return "-" if v is None else v


def show_consumer(doc: dict, json: bool) -> None:
    if json:
        print_json(doc)
        return
    print(f"group {doc['group']} (consumer protocol): {doc['state']}, epoch "
          f"{doc['group_epoch']}, assignment epoch {doc['assignment_epoch']}, "
          f"{len(doc['members'])} members, assignor {doc['assignor'] or '-'}")
    print_table(["Member", "Epoch", "Client", "Host", "Instance", "Current assignment",
                 "Target assignment"],
                [[m["member_id"], m["member_epoch"], m["client_id"], m["host"],
                  _dash(m["instance_id"]), short(m["assignment"]),
                  short(m["target_assignment"])] for m in doc["members"]])
    if doc["offsets"]:
        print_table(["Topic", "Partition", "Committed", "Log end", "Lag", "Member"],
                    [[o["topic"], o["partition"], _dash(o["committed"]), o["log_end_offset"],
                      _dash(o["lag"]), o["member_id"] or "-"] for o in doc["offsets"]])


def show_share(doc: dict, json: bool) -> None:
    if json:
        print_json(doc)
        return
    print(f"share group {doc['group']}: {doc['state']}, epoch {doc['group_epoch']}, "
          f"{len(doc['members'])} members, assignor {doc['assignor'] or '-'}")
    print_table(["Member", "Epoch", "Client", "Host", "Subscribed", "Assigned"],
                [[m["member_id"], m["member_epoch"], m["client_id"], m["host"],
                  ",".join(m["subscribed_topics"]) or "-", short(m["assignment"])]
                 for m in doc["members"]])
    print_table(["Topic", "Partition", "Start offset", "Lag"],
                [[o["topic"], o["partition"], _dash(o["start_offset"]), _dash(o["lag"])]
                 for o in doc["start_offsets"]])
    if doc["in_flight"] is None:
        print("in-flight records: give --admin-endpoint host:port (the partition leaders' "
              "spool.admin.http.listener) to see them")
        return
    now = int(time.time() * 1000)
    rows = []
    for p in doc["in_flight"]:
        for r in p["in_flight"]:
            lock = (f"{max(r['lock_deadline_ms'] - now, 0)} ms"
                    if r["lock_deadline_ms"] is not None else "-")
            rows.append([p["topic"], p["partition"], f"{r['first_offset']}-{r['last_offset']}",
                         r["state"], r["delivery_count"], r["member_id"] or "-", lock])
    print_table(["Topic", "Partition", "Offsets", "State", "Deliveries", "Member", "Lock left"],
                rows, title="In-flight records")
