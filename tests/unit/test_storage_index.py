"""Offset and time indexes: floor lookups, fullness, trim/reopen, truncation, sanity checks."""

from __future__ import annotations

import pytest

from spool.storage.index import CorruptIndexError, OffsetIndex, TimeIndex


def test_offset_index_floor_lookup(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 100, 8 * 10)
    idx.make_writable()
    assert idx.lookup(150) == (100, 0)
    for off, pos in [(110, 400), (120, 800), (135, 1300)]:
        idx.append(off, pos)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 400)
    assert idx.lookup(134) == (120, 800)
    assert idx.lookup(10**9) == (135, 1300)
    assert idx.lookup_position(799) == (110, 400)
    assert idx.lookup_position(800) == (120, 800)
    assert idx.last_entry == (135, 1300)


def test_offset_index_rejects_non_increasing_and_overflow(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 0, 8 * 4)
    idx.make_writable()
    idx.append(5, 100)
    with pytest.raises(ValueError):
        idx.append(5, 200)
    with pytest.raises(ValueError):
        idx.append(6, 100)
    with pytest.raises(ValueError):
        idx.append(2**31, 300)


def test_offset_index_full_trim_and_reopen(tmp_path):
    path = tmp_path / "0.index"
    idx = OffsetIndex(path, 0, 8 * 3 + 5)  # rounds down to 3 entries
    idx.make_writable()
    assert idx.max_entries == 3
    for i in range(1, 4):
        idx.append(i, i * 10)
    assert idx.is_full
    with pytest.raises(ValueError):
        idx._write(9, 90)
    idx.truncate_to(3)
    assert idx.entries == 2 and not idx.is_full
    idx.trim()
    assert path.stat().st_size == 16
    idx.close()
    again = OffsetIndex(path, 0, 1024)
    assert again.entries == 2 and again.lookup(100) == (2, 20)
    again.sanity_check(log_size=1000)
    again.make_writable()
    again.append(7, 70)
    assert again.lookup(8) == (7, 70)
    again.close()


def test_offset_index_sanity_check_catches_garbage(tmp_path):
    path = tmp_path / "0.index"
    path.write_bytes(bytes.fromhex("00000005000000640000000300000010"))  # (5,100),(3,16)
    idx = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(log_size=10_000)
    idx.close()
    path.write_bytes(bytes.fromhex("0000000500000064"))
    idx = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(log_size=50)  # position past the end of the log
    idx.close()


def test_time_index_keeps_a_slot_and_only_grows(tmp_path):
    idx = TimeIndex(tmp_path / "0.timeindex", 1000, 12 * 3)
    idx.make_writable()
    assert idx.lookup(5) == (-1, 1000)
    assert idx.maybe_append(50, 1001)
    assert not idx.maybe_append(50, 1002)  # not newer: skipped
    assert idx.maybe_append(70, 1004)
    assert idx.is_full  # one of three slots is reserved
    with pytest.raises(ValueError):
        idx.maybe_append(90, 1005)
    assert idx.maybe_append(90, 1005, skip_full_check=True)
    assert idx.lookup(69) == (50, 1001)
    assert idx.lookup(70) == (70, 1004)
    assert idx.lookup(70, strict=True) == (50, 1001)
    idx.truncate_to(1004)
    assert idx.last_entry == (50, 1001)
    idx.close()


def test_reset_empties_a_preallocated_index(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 0, 8 * 100)
    idx.make_writable()
    for i in range(1, 10):
        idx.append(i, i)
    idx.reset()
    assert idx.entries == 0 and idx.lookup(5) == (0, 0)
    idx.append(3, 3)
    assert idx.lookup(5) == (3, 3)
    idx.close()
    assert (tmp_path / "0.index").stat().st_size == 8
