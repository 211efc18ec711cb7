"""Deterministic simulation of the KRaft quorum (sim.py); ``python -m tests.sim``."""
