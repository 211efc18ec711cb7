"""Help texts with Kafka's bracketed syntax keep their brackets (rich markup would eat
``[name=...]`` as a style tag and print ``'SCRAM-SHA-256='``)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from spool.cli.main import app


@pytest.mark.parametrize(("command", "shown"), [
    (["storage", "format"], "SCRAM-SHA-256=[name=alice,password=alice-secret]"),
    (["cluster", "up"], "SCRAM-SHA-256=[name=alice,password=alice-secret]"),
    (["users", "scram", "set"], "SCRAM-SHA-256=[iterations=8192,password=...]"),
])
def test_bracketed_examples_survive_in_help(command, shown):
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert shown in result.output
