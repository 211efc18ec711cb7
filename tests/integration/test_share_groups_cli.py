"""``spool groups`` and ``spool share-groups`` on a share group (KIP-932), as real processes:
a ShareConsumer holding acquired records (then killed with -9), a real broker with its
admin endpoint: list --type share, describe (members, start offsets, in-flight records
with their holder and delivery count), reset-offsets refused while the group has a
member and applied once it is empty, then the topic's share state deleted."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.cli import spool_cli
from tests.helpers.share import OVERRIDES, create_topic, produce

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share-cli") / "data",
                      {**OVERRIDES, "spool.admin.http.listener": "127.0.0.1:0"})
    b.start()
    yield b
    b.stop()


def _admin_endpoint(b: BrokerProcess) -> str:
    return b.http_urls["admin"].removeprefix("http://")


def spool(b: BrokerProcess, *args: str) -> subprocess.CompletedProcess:
    return spool_cli(*args, "-b", b.bootstrap)  # in-process (tests.helpers.cli)


def _describe(b: BrokerProcess, group: str) -> dict:
    done = spool(b, "groups", "describe", group, "--json", "--admin-endpoint",
                 _admin_endpoint(b))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_share_group_list_describe_reset(share_broker):
    b = share_broker
    topic, group = "share-cli", "share-cli-group"
    create_topic(b.bootstrap, topic)
    produce(b.bootstrap, topic, 0, 20)
    assert spool(b, "configs", "alter", "--group", group, "--add-config",
                 "share.auto.offset.reset=earliest,share.record.lock.duration.ms=60000"
                 ).returncode == 0  # the locks outlast the commands below
    holder = subprocess.Popen([sys.executable, "-m", "tests.helpers.share_holder", b.bootstrap,
                               group, topic], stdout=subprocess.PIPE, text=True)
    try:
        held = json.loads(holder.stdout.readline())
        assert held["delivery_counts"] == [1] * len(held["offsets"])

        listed = json.loads(spool(b, "groups", "list", "--type", "share", "--json").stdout)
        assert [(g["group"], g["type"], g["state"]) for g in listed] == [
            (group, "share", "Stable")]
        assert group not in spool(b, "groups", "list", "--type", "classic").stdout.split()

        doc = _describe(b, group)
        [member] = doc["members"]
        assert (doc["type"], member["subscribed_topics"], member["assignment"]) == (
            "share", [topic], [{"topic": topic, "partition": 0}])
        # the state's start offset (null until the leader first writes it) and the leader's
        assert [(o["topic"], o["partition"]) for o in doc["start_offsets"]] == [(topic, 0)]
        assert doc["start_offsets"][0]["start_offset"] in (None, 0)
        [part] = doc["in_flight"]
        assert (part["topic"], part["partition"], part["start_offset"]) == (topic, 0, 0)
        acquired = [r for r in part["in_flight"] if r["state"] == "ACQUIRED"]
        assert [(r["first_offset"], r["last_offset"], r["delivery_count"], r["member_id"])
                for r in acquired] == [(min(held["offsets"]), max(held["offsets"]), 1,
                                        member["member_id"])]
        table = spool(b, "groups", "describe", group, "--admin-endpoint", _admin_endpoint(b))
        assert table.returncode == 0, table.stderr
        assert f"share group {group}: Stable" in table.stdout
        assert [line.split()[:5] for line in table.stdout.splitlines() if "ACQUIRED" in line] == [
            [topic, "0", f"{min(held['offsets'])}-{max(held['offsets'])}", "ACQUIRED", "1"]]

        refused = spool(b, "share-groups", "reset-offsets", "--group", group, "--topic", topic,
                        "--to-latest", "--execute")
        assert refused.returncode == 1
        assert refused.stderr.splitlines() == [
            f"spool: share group '{group}' is not empty: it is Stable with 1 members; stop its "
            "consumers first (NON_EMPTY_GROUP)"]
    finally:
        holder.kill()  # -9: its records come back after the lock, its membership after
        holder.wait()  # the session timeout
    deadline = time.monotonic() + 30
    while _describe(b, group)["state"] != "Empty":
        assert time.monotonic() < deadline, "the killed member never left"
        time.sleep(0.5)

    plan = spool(b, "share-groups", "reset-offsets", "--group", group, "--topic", topic,
                 "--to-offset", "5", "--json")
    assert (plan.returncode, json.loads(plan.stdout)) == (
        0, [{"topic": topic, "partition": 0, "start_offset": 5}])
    assert "dry run" in plan.stderr
    done = spool(b, "share-groups", "reset-offsets", "--group", group, "--topic", topic,
                 "--to-latest", "--execute")
    assert done.returncode == 0, done.stderr
    assert _describe(b, group)["start_offsets"][0]["start_offset"] == 20
    deleted = spool(b, "share-groups", "delete-offsets", "--group", group, "--topic", topic,
                    "--json")
    assert (deleted.returncode, deleted.stdout) == (
        0, json.dumps({"group": group, "topics": [topic]}) + "\n"), deleted.stderr
    assert _describe(b, group)["start_offsets"] == []
