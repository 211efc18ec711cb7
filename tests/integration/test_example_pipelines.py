"""The example pipelines as a user meets them, without starting Spark: --help gives every
option a text and its default, a missing topic is said so (before any JVM starts), --at
takes a time ago, a micro-batch's progress line, Ctrl-C of a streaming run.
(tests/spark/test_pipelines.py runs them on Spark.)"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka.admin import AdminClient

from examples.as_of import parse_at
from examples.common import progress_line

PIPELINES = ("seed_orders", "windowed_aggregates", "replay_to_parquet", "as_of")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_example(module: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"examples.{module}", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def main_of(module: str):
    return importlib.import_module(f"examples.{module}").main


@pytest.mark.parametrize("module", PIPELINES)
def test_help_gives_every_option_a_text_and_its_default(module, monkeypatch, capsys):
    monkeypatch.setenv("SPOOL_BOOTSTRAP", "10.1.2.3:9093")
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with pytest.raises(SystemExit) as e:
        main_of(module)()
    assert e.value.code == 0
    help_text = capsys.readouterr().out
    out = " ".join(help_text.split())
    assert out.startswith(f"usage: python -m examples.{module} ")
    assert ("--bootstrap-server HOST:PORT, -b HOST:PORT a broker to start from (comma-separated "
            "list allowed; environment SPOOL_BOOTSTRAP) (default: 10.1.2.3:9093)") in out
    blocks = help_text.split("\n  --")[1:]  # one per option after -h
    assert len(blocks) >= 2
    for block in blocks:  # each has a text, and a default unless it is required (--at)
        text = " ".join(block.split())
        assert len(text.split(" ", 2)) == 3, text
        assert "(default: " in text or text.startswith("at TIME "), text


@pytest.mark.parametrize("module, args", [
    ("replay_to_parquet", ["--topic", "no-such-topic"]),
    ("as_of", ["--topic", "no-such-topic", "--at", "30m ago"]),
    ("windowed_aggregates", ["--source", "no-such-topic"]),
])
def test_a_missing_topic_is_said_so_before_spark_starts(broker, module, args, monkeypatch):
    monkeypatch.setattr(sys, "argv", [module, "--bootstrap-server", broker.bootstrap, *args])
    monkeypatch.setattr("examples.common.session", None)  # (called: a TypeError)
    with pytest.raises(SystemExit) as e:
        main_of(module)()
    assert e.value.code == (
        f"python -m examples.{module}: topic 'no-such-topic' does not exist at "
        f"{broker.bootstrap} (python -m examples.seed_orders --topic NAME creates one)")


def test_the_missing_topic_line_and_exit_1_in_a_shell_with_spool_bootstrap(broker):
    done = run_example("replay_to_parquet", "--topic", "no-such-topic",
                       env={"SPOOL_BOOTSTRAP": broker.bootstrap})
    assert (done.returncode, done.stderr) == (1, (
        f"python -m examples.replay_to_parquet: topic 'no-such-topic' does not exist at "
        f"{broker.bootstrap} (python -m examples.seed_orders --topic NAME creates one)\n"))


def test_at_takes_iso_8601_or_a_time_ago():
    now = 1_800_000_000_000
    assert parse_at("30m ago", now) == parse_at("-30m", now) == now - 1_800_000
    assert parse_at("2h ago", now) == now - 7_200_000
    assert parse_at("1.5d ago", now) == now - 129_600_000
    assert parse_at("2027-01-15T08:00:00Z", now) == 1_800_000_000_000
    assert parse_at("2027-01-15T09:00:00+01:00", now) == 1_800_000_000_000
    assert parse_at("2027-01-15T08:00:00", now) == 1_800_000_000_000  # UTC
    with pytest.raises(ValueError, match=r"--at 'yesterday': expected ISO 8601"):
        parse_at("yesterday", now)


def test_a_micro_batch_progress_line():
    progress = {"batchId": 3, "processedRowsPerSecond": 1234.5,
                "durationMs": {"triggerExecution": 812},
                "sources": [{"numInputRows": 2000, "endOffset": '{"orders":{"0":700,"1":1300}}'}],
                "sink": {"numOutputRows": 12}}
    assert progress_line(progress) == ('batch 3: 2000 records read (1234/s), 12 written in '
                                       '812 ms; offsets now {"orders":{"0":700,"1":1300}}')


FAKE_STREAM = textwrap.dedent("""
    import sys, time
    from examples.common import interrupted, on_ctrl_c
    from examples.windowed_aggregates import follow

    class Query:  # a streaming query that never ends by itself
        recentProgress = []
        def awaitTermination(self, timeout):
            time.sleep(timeout)
            return False
        def stop(self):
            print("query stopped", flush=True)

    stop = on_ctrl_c("prog", graceful=True)
    print("running", flush=True)
    if not follow(Query(), stop, 0.05):
        interrupted("prog")
""")


def test_ctrl_c_stops_a_streaming_run_between_batches_without_a_traceback():
    p = subprocess.Popen([sys.executable, "-c", FAKE_STREAM], cwd=ROOT, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == "running\n"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert (p.returncode, out, err) == (130, "query stopped\n", "prog: interrupted\n")


def test_ctrl_c_while_seeding_exits_130_quietly(broker):
    topic = f"ctrl-c-{time.monotonic_ns()}"
    p = subprocess.Popen([sys.executable, "-m", "examples.seed_orders", "--bootstrap-server",
                          broker.bootstrap, "--topic", topic, "--count", "100000000",
                          "--partitions", "1"], cwd=ROOT, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         # SIGINT at its default, as a terminal's command starts: a run started
                         # in the background (CI) ignores SIGINT, and a child would inherit that
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deadline = time.monotonic() + 60
    while topic not in admin.list_topics(timeout=10).topics:  # it is producing from then on
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (130, "python -m examples.seed_orders: interrupted\n")
