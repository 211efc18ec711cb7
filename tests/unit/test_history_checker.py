"""The cluster history checker (tests/helpers/history.py) decides correctly: each rule
flags the violation it names and passes a history that holds."""

from __future__ import annotations

from tests.helpers.history import OK, REJECTED, UNKNOWN, History, NodeView, check, classify

RACKS = {1: "a", 2: "b", 3: "c"}
BROKERS = {1: ("a", "127.0.0.1:1001"), 2: ("b", "127.0.0.1:1002"), 3: ("c", "127.0.0.1:1003")}


def view(node: int, topics=None, configs=None, controller=1, brokers=None) -> NodeView:
    return NodeView(node, brokers=dict(BROKERS if brokers is None else brokers),
                    controller_id=controller, topics=dict(topics or {}),
                    configs=dict(configs or {}))


def op(h: History, outcome: str, kind: str, topic: str, **kw):
    return h.end(h.begin(kind, topic, **kw), outcome, "" if outcome == OK else "X")


def test_a_history_that_holds_has_no_violations():
    h = History()
    op(h, OK, "create_topic", "t1", partitions=3)
    op(h, OK, "alter_config", "t1", key="retention.ms", value="1000")
    views = [view(n, {"t1": ("id1", 3)}, {"t1": {"retention.ms": "1000"}}) for n in (1, 2, 3)]
    for v in views:
        h.observe(v)
    assert check(h, views, RACKS) == []


def test_an_acknowledged_topic_missing_from_one_node_is_lost():
    h = History()
    op(h, OK, "create_topic", "t1", partitions=3)
    views = [view(1, {"t1": ("id1", 3)}), view(2, {}), view(3, {"t1": ("id1", 3)})]
    bad = check(h, views, RACKS)
    assert len(bad) == 1 and "topic t1: node 2 shows it absent" in bad[0]


def test_wrong_partition_count_and_topic_from_nowhere_are_violations():
    h = History()
    op(h, OK, "create_topic", "t1", partitions=3)
    views = [view(1, {"t1": ("id1", 2), "ghost": ("id9", 1)})]
    bad = check(h, views, {1: "a", 2: "b", 3: "c"})
    assert any("node 1 shows it present with 2 partitions" in b for b in bad)
    assert any("topic ghost: node 1 lists it but no operation created it" in b for b in bad)


def test_unknown_outcomes_may_go_either_way_but_rejected_ones_may_not_appear():
    h = History()
    op(h, UNKNOWN, "create_topic", "maybe", partitions=1)
    op(h, REJECTED, "create_topic", "never", partitions=1)
    assert check(h, [view(1, {"maybe": ("i", 1)}), view(2, {"maybe": ("i", 1)})], RACKS) == []
    assert check(h, [view(1, {}), view(2, {})], RACKS) == []
    bad = check(h, [view(1, {"never": ("j", 1)})], RACKS)
    assert len(bad) == 1 and "topic never: node 1 shows it present" in bad[0]


def test_an_acknowledged_delete_must_be_visible():
    h = History()
    op(h, OK, "create_topic", "t", partitions=1)
    op(h, OK, "delete_topic", "t")
    assert check(h, [view(1, {})], RACKS) == []
    assert "node 1 shows it present" in check(h, [view(1, {"t": ("i", 1)})], RACKS)[0]


def test_nodes_disagreeing_on_topic_id_or_controller_are_violations():
    h = History()
    op(h, OK, "create_topic", "t", partitions=1)
    bad = check(h, [view(1, {"t": ("i1", 1)}), view(2, {"t": ("i2", 1)}, controller=2)], RACKS)
    assert any("disagree on its topic id" in b for b in bad)
    assert any("disagree on the controller" in b for b in bad)


def test_config_values_follow_the_last_acknowledged_write():
    h = History()
    op(h, OK, "create_topic", "t", partitions=1)
    op(h, OK, "alter_config", "t", key="retention.ms", value="1000")
    op(h, OK, "alter_config", "t", key="retention.ms", value="2000")
    op(h, UNKNOWN, "alter_config", "t", key="retention.ms", value="3000")
    ok = [view(1, {"t": ("i", 1)}, {"t": {"retention.ms": "2000"}}),
          view(2, {"t": ("i", 1)}, {"t": {"retention.ms": "3000"}})]
    assert check(h, ok, RACKS) == []
    stale = [view(1, {"t": ("i", 1)}, {"t": {"retention.ms": "1000"}})]
    bad = check(h, stale, RACKS)
    assert len(bad) == 1 and "config t retention.ms: node 1 shows '1000'" in bad[0]
    reverted = [view(1, {"t": ("i", 1)}, {"t": {"retention.ms": None}})]
    assert len(check(h, reverted, RACKS)) == 1


def test_a_registered_broker_missing_or_with_another_rack_is_a_violation():
    h = History()
    h.observe(view(1))
    missing = {1: BROKERS[1], 2: BROKERS[2]}
    bad = check(h, [view(1, brokers=missing)], RACKS)
    assert bad == ["broker 3: registered (rack c) but node 1 does not list it"]
    moved = {**BROKERS, 2: ("z", "127.0.0.1:1002")}
    bad = check(h, [view(1, brokers=moved)], RACKS)
    assert len(bad) == 1 and "broker 2: node 1 lists rack z" in bad[0]
    extra = {**BROKERS, 7: (None, "127.0.0.1:7")}
    assert "broker 7: node 1 lists it but it never registered" in check(h, [view(1, brokers=extra)],
                                                                          RACKS)[0]


def test_an_unreadable_node_is_a_violation_not_a_pass():
    h = History()
    bad = check(h, [NodeView(2, error="refused")], RACKS)
    assert bad == ["node 2 could not be read: refused"]


def test_classify():
    assert classify(None) == OK and classify("NONE") == OK
    assert classify("INVALID_PARTITIONS") == REJECTED
    assert classify("REQUEST_TIMED_OUT") == UNKNOWN and classify("NOT_CONTROLLER") == UNKNOWN
