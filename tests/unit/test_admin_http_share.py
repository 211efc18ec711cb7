"""GET /share-partitions?group= of the admin endpoint: a share group's in-flight records,
as the broker's share manager describes them (``spool groups describe``'s table); the
end-to-end check with ShareConsumers is tests/integration/test_share_groups_cli.py."""

from __future__ import annotations

from types import SimpleNamespace

from spool.broker.admin_http import AdminHttp
from spool.share.partition import SharePartition


def test_in_flight_records_of_one_group() -> None:
    sp = SharePartition(10, record_lock_duration_ms=30000)
    sp.acquire("m1", [(10, 14), (15, 19)], 500, now_ms=1000)
    accept = SimpleNamespace(first_offset=10, last_offset=11, acknowledge_types=[1])
    assert sp.acknowledge("m1", [accept]).error_code == 0  # the start offset moves to 12
    manager = SimpleNamespace(describe=lambda group: {("t", 0): sp.describe()} if group == "g"
                              else {})
    http = AdminHttp(SimpleNamespace(share_manager=manager), "127.0.0.1:0")
    assert http._answer(["GET", "/share-partitions?group=g"]) == ("200 OK", [{
        "topic": "t", "partition": 0, "start_offset": 12, "end_offset": 20,
        "in_flight": [{"first_offset": 12, "last_offset": 19, "state": "ACQUIRED",
                       "delivery_count": 1, "member_id": "m1", "lock_deadline_ms": 31000}]}])
    assert http._answer(["GET", "/share-partitions?group=nobody"]) == ("200 OK", [])
    assert AdminHttp(SimpleNamespace(share_manager=None), "127.0.0.1:0")._answer(
        ["GET", "/share-partitions?group=g"]) == ("200 OK", [])
