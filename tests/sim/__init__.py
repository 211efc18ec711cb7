"""Deterministic simulation of the KRaft quorum: sim.py (the Raft core under a seeded
faulty network, clocks, crashes; memory or disk stores), controller_sim.py (the same with
a QuorumController on every node). ``python -m tests.sim --help`` runs and replays seeds."""
