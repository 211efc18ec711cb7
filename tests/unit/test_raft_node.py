"""The Raft core's rules one at a time, stepped through a lockstep network
(tests/helpers/raft_harness.py). The seeded, faulty simulation is tests/sim."""

from __future__ import annotations

import random

import pytest

from spool.cluster.raft import (
    FOLLOWER,
    LEADER,
    PROSPECTIVE,
    RESIGNED,
    ElectionState,
    EndQuorumEpochRequest,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    LeaderIdAndEpoch,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    RaftConfig,
    RaftNode,
    Respond,
    Send,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from spool.protocol.errors import Errors, KafkaError
from tests.helpers.raft_harness import CONFIG, Harness


def test_a_single_voter_elects_itself_at_once_and_commits_alone() -> None:
    h = Harness([1])
    h.poll(1)
    node = h.nodes[1]
    assert (node.role, node.epoch, node.leader_id) == (LEADER, 1, 1)
    last = node.append([b"a", b"b"], h.now)
    assert last == 2  # offset 0 is the leader's LeaderChange entry
    assert node.high_watermark == 3
    assert [e.value for e in node.committed_entries(1)] == [b"a", b"b"]


def test_three_voters_elect_one_leader_and_persist_their_votes() -> None:
    h = Harness([1, 2, 3])
    leader = h.run_until_leader()
    assert leader.epoch == 1
    assert [n.role for n in h.nodes.values()].count(LEADER) == 1
    for i, node in h.nodes.items():
        assert h.states[i].read() == ElectionState(1, node.voted_id, leader.node_id)
    assert h.states[leader.node_id].read().voted_id == leader.node_id
    h.append_and_commit([b"x"])
    h.step(100)
    assert {n.high_watermark for n in h.nodes.values()} == {2}


def test_a_vote_is_durable_before_it_is_granted_and_survives_a_restart() -> None:
    h = Harness([1, 2, 3])
    req = VoteRequest(None, 1, 1, 0, 0)
    resp, _ = h.nodes[2].handle_request(1, req, 0)
    assert resp.vote_granted and resp.error_code == Errors.NONE
    assert h.states[2].read() == ElectionState(1, 1, -1)
    h.start(2)  # a crash: the node keeps only its stores
    resp, _ = h.nodes[2].handle_request(3, VoteRequest(None, 1, 3, 0, 0), 0)
    assert not resp.vote_granted
    resp, _ = h.nodes[2].handle_request(1, req, 0)  # a retried request is granted again
    assert resp.vote_granted


def test_no_vote_for_a_candidate_whose_log_is_behind() -> None:
    log = MemoryRaftLog()
    log.append_as_leader([b"a", b"b"], 1)
    node = RaftNode(2, [1, 2, 3], log, MemoryQuorumStateStore(), CONFIG, random.Random(0), 0)
    resp, _ = node.handle_request(1, VoteRequest(None, 2, 1, 1, 1), 0)  # ends at 1 < 2
    assert not resp.vote_granted and node.epoch == 2 and node.voted_id == -1
    resp, _ = node.handle_request(3, VoteRequest(None, 2, 3, 1, 2), 0)
    assert resp.vote_granted and node.voted_id == 3


def test_pre_vote_from_a_node_that_was_cut_off_does_not_disturb_a_healthy_leader() -> None:
    h = Harness([1, 2, 3])
    leader = h.run_until_leader()
    epoch = leader.epoch
    cutoff = next(i for i in h.nodes if i != leader.node_id)
    h.isolate(cutoff)
    h.step(1000)  # it times out again and again, asking for pre-votes nobody receives
    assert h.nodes[cutoff].role == PROSPECTIVE or h.nodes[cutoff].role == "unattached"
    assert h.nodes[cutoff].epoch == epoch  # a pre-vote never bumps the epoch
    h.heal()
    h.step(1000)
    assert leader.role == LEADER and leader.epoch == epoch
    assert h.nodes[cutoff].role == FOLLOWER and h.nodes[cutoff].leader_id == leader.node_id
    pre_votes = [r for s, _, r in h.requests if isinstance(r, VoteRequest) and s == cutoff]
    assert pre_votes and all(r.pre_vote for r in pre_votes)


def test_a_voter_that_hears_from_its_leader_refuses_a_pre_vote() -> None:
    h = Harness([1, 2, 3])
    leader = h.run_until_leader()
    h.step(50)  # the followers fetch once: until then they may grant pre-votes
    follower = next(n for n in h.nodes.values() if n.role == FOLLOWER)
    other = next(i for i in h.voters if i not in (leader.node_id, follower.node_id))
    pre_vote = VoteRequest(None, leader.epoch + 1, other, 99, 99, pre_vote=True)
    resp, _ = follower.handle_request(other, pre_vote, h.now)
    assert resp.error_code == Errors.NONE and not resp.vote_granted
    assert follower.epoch == leader.epoch


def test_a_stale_epoch_is_fenced_and_told_the_current_leader() -> None:
    h = Harness([1, 2, 3])
    leader = h.run_until_leader()
    old_id, old_epoch = leader.node_id, leader.epoch
    leader.resign(h.now)
    h.poll(old_id)
    new = h.run_until_leader()
    assert new.epoch == old_epoch + 1
    resp, _ = new.handle_request(old_id, FetchRequest(None, old_id, 0, old_epoch, 0, 0), h.now)
    assert resp.error_code == Errors.FENCED_LEADER_EPOCH
    assert resp.current_leader == LeaderIdAndEpoch(new.node_id, new.epoch)


def test_append_on_a_follower_is_refused_as_not_leader() -> None:
    h = Harness([1, 2, 3])
    h.run_until_leader()
    follower = next(n for n in h.nodes.values() if n.role == FOLLOWER)
    with pytest.raises(KafkaError) as err:
        follower.append([b"x"], h.now)
    assert err.value.code == Errors.NOT_LEADER_OR_FOLLOWER


def _log(*epochs: int) -> MemoryRaftLog:
    log = MemoryRaftLog()
    for i, e in enumerate(epochs):
        log.append_as_leader([b"%d@%d" % (i, e)], e)
    return log


def test_a_follower_truncates_where_its_log_diverges_from_the_leader() -> None:
    # Node 2 holds entries of epoch 2 that were never committed; the others moved on in
    # epoch 3 from offset 3. Node 2 cannot win (its last epoch is older) and must cut 3..5.
    logs = {1: _log(1, 1, 1, 3, 3), 2: _log(1, 1, 1, 2, 2, 2), 3: _log(1, 1, 1, 3, 3)}
    h = Harness([1, 2, 3], logs=logs)
    for i, epoch in ((1, 3), (2, 2), (3, 3)):
        h.states[i].write(ElectionState(epoch))
        h.start(i)
    leader = h.run_until_leader()
    assert leader.node_id in (1, 3) and leader.epoch == 4
    resp, _ = leader.handle_request(2, FetchRequest(None, 2, 0, 4, 6, 2), h.now)
    assert resp.diverging_epoch == EpochEndOffset(1, 3)
    h.append_and_commit([b"after"])
    h.step(200)
    entries = [(e.epoch, e.value) for e in logs[2].entries(0, logs[2].end_offset)]
    assert entries == [(e.epoch, e.value) for e in logs[1].entries(0, logs[1].end_offset)]
    assert (2, b"3@2") not in entries and entries[3] == (3, b"3@3")


def test_a_far_behind_follower_catches_up_from_a_snapshot_in_chunks() -> None:
    config = RaftConfig(election_timeout_ms=100, fetch_timeout_ms=200, request_timeout_ms=100,
                        fetch_max_wait_ms=50, fetch_snapshot_max_bytes=7)
    h = Harness([1, 2, 3], config=config)
    leader = h.run_until_leader()
    behind = next(i for i in h.nodes if i != leader.node_id)
    h.isolate(behind)
    for k in range(10):
        h.append_and_commit([b"v%d" % k])
    data = b"the image of offsets [0, 8)"
    sid = leader.create_snapshot(8, data)
    assert sid == SnapshotId(8, leader.epoch)
    assert h.logs[leader.node_id].log_start_offset == 8
    h.heal()
    h.step(300)
    node = h.nodes[behind]
    assert h.snapshots_installed(behind) == [sid]
    chunks = [r for s, _, r in h.requests if s == behind and isinstance(r, FetchSnapshotRequest)]
    assert len(chunks) == 4 and [c.position for c in chunks] == [0, 7, 14, 21]
    assert h.logs[behind].read_snapshot(sid, 0, 1 << 20) == (data, len(data))
    assert h.logs[behind].log_start_offset == 8
    assert node.log_end_offset == leader.log_end_offset
    assert node.high_watermark == leader.high_watermark == 11


def test_a_leader_cut_off_from_the_majority_resigns_by_check_quorum() -> None:
    h = Harness([1, 2, 3])
    leader = h.run_until_leader()
    h.isolate(leader.node_id)
    h.step(CONFIG.check_quorum_timeout_ms + 10)
    assert leader.role == RESIGNED
    with pytest.raises(KafkaError):
        leader.append([b"x"], h.now)
    others = [n for n in h.nodes.values() if n is not leader]
    h.step(1000)
    assert any(n.role == LEADER and n.epoch > leader.epoch for n in others)


def test_resign_hands_leadership_to_the_preferred_successor() -> None:
    h = Harness([1, 2, 3])
    leader = h.run_until_leader()
    h.append_and_commit([b"x"])
    h.step(100)
    old_epoch = leader.epoch
    leader.resign(h.now)
    h.poll(leader.node_id)
    ends = [r for s, _, r in h.requests if isinstance(r, EndQuorumEpochRequest)]
    assert ends and set(ends[0].preferred_successors) == set(h.voters) - {leader.node_id}
    successor = ends[0].preferred_successors[0]
    h.step(5)  # the first successor stands at once, far within an election timeout
    assert h.nodes[successor].role == LEADER
    assert h.nodes[successor].epoch == old_epoch + 1


def test_an_observer_replicates_but_never_votes_or_counts() -> None:
    h = Harness([1, 2, 3], observers=[4])
    leader = h.run_until_leader()
    h.append_and_commit([b"x"])
    h.step(200)
    observer = h.nodes[4]
    assert observer.role == FOLLOWER and observer.leader_id == leader.node_id
    assert observer.high_watermark == leader.high_watermark
    assert not any(isinstance(r, VoteRequest) for s, d, r in h.requests if 4 in (s, d))
    resp, _ = observer.handle_request(1, VoteRequest(None, 9, 1, 9, 9), h.now)
    assert resp.error_code == Errors.INCONSISTENT_VOTER_SET and not resp.vote_granted
    # With two voters cut off, the observer's fetches do not make a majority.
    for i in h.voters:
        if i != leader.node_id:
            h.isolate(i)
    h.cut.discard(frozenset((leader.node_id, 4)))
    last = leader.append([b"y"], h.now)
    h.step(CONFIG.check_quorum_timeout_ms - 50)
    assert observer.log_end_offset > last
    assert leader.high_watermark <= last


def test_an_empty_fetch_is_parked_until_the_leader_appends() -> None:
    h = Harness([1, 2, 3])
    leader = h.run_until_leader()
    h.step(100)
    follower = next(i for i in h.nodes if i != leader.node_id)
    req = FetchRequest(None, follower, 500, leader.epoch, leader.log_end_offset, leader.epoch)
    resp, _ = leader.handle_request(follower, req, h.now)
    assert resp is None
    leader.append([b"x"], h.now)
    out = leader.poll(h.now)
    answers = [o for o in out if isinstance(o, Respond) and o.request is req]
    assert len(answers) == 1
    assert isinstance(answers[0].response, FetchResponse)
    assert answers[0].response.records is not None


def test_a_single_voter_restarted_as_leader_leads_again_at_once() -> None:
    h = Harness([1])
    h.poll(1)
    h.nodes[1].append([b"a"], h.now)
    h.start(1)  # restart: it cannot resume its epoch, so it starts the next one
    h.poll(1)
    node = h.nodes[1]
    assert (node.role, node.epoch) == (LEADER, 2)
    assert [e.value for e in node.committed_entries(0) if e.value] == [b"a"]


def test_a_new_leader_commits_earlier_epochs_only_behind_an_entry_of_its_own() -> None:
    # Raft's figure 8: offsets 0-1 reach a majority under the leader of epoch 3, but
    # they are of epochs 1 and 2; only once its own LeaderChange (offset 2) is on a
    # majority does the high watermark move, and then past all three.
    log = _log(1, 2)
    state = MemoryQuorumStateStore()
    state.write(ElectionState(2))
    node = RaftNode(1, [1, 2, 3], log, state, CONFIG, random.Random(0), 0)
    now = 10 * CONFIG.election_timeout_ms
    pre_vote = next(o.request for o in node.poll(now) if isinstance(o, Send) and o.dst == 2)
    assert pre_vote.pre_vote and node.role == PROSPECTIVE
    out = node.handle_response(2, pre_vote, VoteResponse(Errors.NONE, -1, 2, True), now)
    vote = next(o.request for o in out if isinstance(o, Send) and o.dst == 2)
    assert not vote.pre_vote and vote.candidate_epoch == 3
    node.handle_response(2, vote, VoteResponse(Errors.NONE, -1, 3, True), now)
    assert node.role == LEADER and node.epoch_start_offset == 2
    node.handle_request(2, FetchRequest(None, 2, 0, 3, 2, 2), now)
    assert node.high_watermark == 0
    node.handle_request(2, FetchRequest(None, 2, 0, 3, 3, 3), now)
    assert node.high_watermark == 3


def test_a_request_from_another_cluster_is_refused() -> None:
    config = RaftConfig(cluster_id="abc")
    node = RaftNode(1, [1, 2, 3], MemoryRaftLog(), MemoryQuorumStateStore(), config,
                    random.Random(0), 0)
    resp, _ = node.handle_request(2, VoteRequest("xyz", 1, 2, 0, 0), 0)
    assert resp.error_code == Errors.INCONSISTENT_CLUSTER_ID and not resp.vote_granted
    assert node.epoch == 0 and node.voted_id == -1


def test_a_follower_that_has_not_fetched_from_its_leader_yet_grants_a_pre_vote() -> None:
    state = MemoryQuorumStateStore()
    state.write(ElectionState(2, -1, 1))  # restarts as a follower of 1, not fetched yet
    node = RaftNode(2, [1, 2, 3], MemoryRaftLog(), state, CONFIG, random.Random(0), 0)
    assert node.role == FOLLOWER
    resp, _ = node.handle_request(3, VoteRequest(None, 3, 3, 0, 0, pre_vote=True), 0)
    assert resp.vote_granted and node.epoch == 2 and node.role == FOLLOWER


def test_a_pre_vote_from_a_later_epoch_moves_even_a_leader_to_that_epoch() -> None:
    # Node 3 reached epoch 3 in an election it lost; it fetches from nobody, so the
    # leader of epoch 2 hears of epoch 3 only through its pre-votes (for epoch 4).
    h = Harness([1, 2, 3])
    leader = h.run_until_leader()
    assert leader.epoch == 1
    other = next(i for i in h.voters if i != leader.node_id)
    resp, _ = leader.handle_request(other, VoteRequest(None, 3, other, 0, 0, pre_vote=True),
                                    h.now)
    assert leader.epoch == 2 and leader.role != LEADER
    assert resp.error_code == Errors.NONE


def test_the_followers_of_a_dead_leader_do_not_split_the_vote_in_most_seeds() -> None:
    # Their parked Fetches are answered together, so their fetch timers expire in the same
    # ms; asking for pre-votes at once, both would stand in the same epoch (50 splits of
    # 50 before the random wait), and only the election timeout would break the tie.
    second_epochs = 0
    for seed in range(50):
        h = Harness([1, 2, 3])
        old = h.run_until_leader()
        h.step(300)
        del h.nodes[old.node_id]  # kill -9
        for i, node in h.nodes.items():
            node.rng = random.Random(seed * 7 + i)
        new = h.run_until_leader()
        assert new.node_id != old.node_id and new.epoch > old.epoch
        second_epochs += new.epoch > old.epoch + 1
    assert second_epochs <= 5
