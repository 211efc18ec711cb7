"""spool.cli.perf_payloads: the values spool perf produce sends."""

from __future__ import annotations

from pathlib import Path

import pytest

from spool.cli.common import CliError
from spool.cli.perf_payloads import Payloads, read_payload_file


def test_record_size_values_are_letters_and_do_not_repeat() -> None:
    p = Payloads(100, None, 1000)
    values = [p.value(i) for i in range(1000)]
    assert all(len(v) == 100 and v.isalpha() and v.isupper() for v in values)
    assert len(set(values)) == 1000
    assert Payloads(100, None, 1000).value(7) == values[7]  # seeded: runs send the same


def test_payload_file_and_monotonic(tmp_path: Path) -> None:
    f = tmp_path / "p.txt"
    f.write_text("a|bb||ccc||")
    assert read_payload_file(str(f), "|") == [b"a", b"bb", b"", b"ccc"]  # Java's split
    p = Payloads(None, [b"a", b"bb"], 10)
    assert {p.value(i) for i in range(50)} == {b"a", b"bb"}
    assert [Payloads(None, None, 3).value(i) for i in range(3)] == [b"0", b"1", b"2"]
    f.write_text("")
    with pytest.raises(CliError, match="is empty"):
        read_payload_file(str(f), "\n")
