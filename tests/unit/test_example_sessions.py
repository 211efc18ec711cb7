"""examples.sessions: the session merge its processor applies per micro-batch, and --gap parsing.

The pipeline's claim is that sessions are a function of the input alone: however the
clicks are cut into micro-batches (and in whatever order a batch holds them), merging
them into the open sessions gives the runs of clicks at most ``gap`` apart.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.sessions import interval_ms, merge


def runs(times: list[int], gap: int) -> list[tuple[int, int, int]]:
    """The answer straight from the definition: sorted clicks, split where the next one
    comes more than ``gap`` after the one before."""
    out: list[tuple[int, int, int]] = []
    for t in sorted(times):
        if out and t - out[-1][1] <= gap:
            out[-1] = (out[-1][0], t, out[-1][2] + 1)
        else:
            out.append((t, t, 1))
    return out


@given(st.lists(st.integers(0, 10_000), max_size=60), st.integers(0, 500),
       st.lists(st.integers(1, 10), max_size=12), st.randoms())
def test_merging_batch_by_batch_gives_the_runs_of_all_clicks(times, gap, cuts, rnd):
    shuffled = list(times)
    rnd.shuffle(shuffled)
    open_sessions: list[tuple[int, int, int]] = []
    rest = shuffled
    for n in cuts:
        open_sessions, rest = merge(open_sessions, rest[:n], gap), rest[n:]
    open_sessions = merge(open_sessions, rest, gap)
    assert open_sessions == runs(times, gap)


def test_a_late_click_bridges_two_open_sessions_into_one():
    assert merge([(0, 10, 2), (100, 120, 3)], [60], 50) == [(0, 120, 6)]


def test_clicks_exactly_gap_apart_are_one_session_and_one_ms_more_are_two():
    assert merge([(0, 0, 1)], [50], 50) == [(0, 50, 2)]
    assert merge([(0, 0, 1)], [51], 50) == [(0, 0, 1), (51, 51, 1)]


def test_gap_parses_as_spark_writes_intervals():
    assert interval_ms("1 minute") == 60_000
    assert interval_ms("30 seconds") == 30_000
    assert interval_ms("1.5 hours") == 5_400_000
    assert interval_ms(" 2 days ") == 172_800_000
    with pytest.raises(ValueError, match="not an interval: '1 fortnight'"):
        interval_ms("1 fortnight")
