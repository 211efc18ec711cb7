"""Log levels per logger and the JSON line format (spool.util.logs)."""

from __future__ import annotations

import json
import logging

import pytest

from spool.broker.config import BrokerConfig, ConfigError
from spool.util.logs import JsonFormatter, configure, fields, parse_levels


def test_a_level_then_logger_levels():
    assert parse_levels("info") == ("INFO", {})
    assert parse_levels("WARNING, spool.storage=debug,spool.coordinator=INFO") == (
        "WARNING", {"spool.storage": "DEBUG", "spool.coordinator": "INFO"})
    assert parse_levels("spool.storage=DEBUG") == ("INFO", {"spool.storage": "DEBUG"})


@pytest.mark.parametrize("spec, message", [
    ("LOUD", "'LOUD': the level must be one of DEBUG, INFO, WARNING, ERROR"),
    ("INFO,spool.storage", "'spool.storage': only the first part may be a bare level; "
                           "the others are logger=LEVEL"),
    ("INFO,=DEBUG", "'=DEBUG': a logger name is missing before '='"),
    ("", "no level given (one of DEBUG, INFO, WARNING, ERROR)"),
])
def test_a_bad_spec_says_which_part(spec, message):
    with pytest.raises(ValueError) as e:
        parse_levels(spec)
    assert str(e.value) == message


def test_the_log_level_key_is_checked_at_load():
    assert BrokerConfig.load(None, ["log.level=WARNING,spool.storage=DEBUG"]).get(
        "log.level") == "WARNING,spool.storage=DEBUG"
    with pytest.raises(ConfigError, match="log.level=LOUD"):
        BrokerConfig.load(None, ["log.level=LOUD"])


def test_configure_sets_the_root_and_each_logger():
    root = logging.getLogger()
    saved = root.level, list(root.handlers)
    try:
        configure("WARNING,spool.test.logs=DEBUG", "json")
        assert root.level == logging.WARNING
        assert logging.getLogger("spool.test.logs").level == logging.DEBUG
        assert logging.getLogger("spool.test.logs.child").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("spool.other").isEnabledFor(logging.INFO)
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
    finally:
        logging.getLogger("spool.test.logs").setLevel(logging.NOTSET)
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]


def test_a_json_line_has_ts_level_logger_message_and_fields():
    rec = logging.LogRecord("spool.storage.log", logging.INFO, __file__, 1,
                            "%s-%d: rolled", ("orders", 0), None)
    rec.__dict__.update(fields(topic="orders", partition=0))
    rec.created = 1_800_000_000.25
    assert json.loads(JsonFormatter().format(rec)) == {
        "ts": "2027-01-15T08:00:00.250Z", "level": "INFO", "logger": "spool.storage.log",
        "message": "orders-0: rolled", "fields": {"topic": "orders", "partition": 0}}
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys
        rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    out = json.loads(JsonFormatter().format(rec))
    assert out["fields"]["exception"].endswith("RuntimeError: boom")


def test_client_error_lines_are_rate_limited_and_say_how_many_were_dropped(monkeypatch, caplog):
    from spool.broker import server

    now = [100.0]
    monkeypatch.setattr(server.time, "monotonic", lambda: now[0])
    limited = server.RateLimitedLog(logging.getLogger("spool.test.ratelimit"), per_second=10)
    with caplog.at_level(logging.INFO, logger="spool.test.ratelimit"):
        for i in range(15):
            limited(logging.INFO, "closing %s: bad frame", f"peer{i}")
        now[0] = 101.0
        limited(logging.INFO, "closing %s: bad frame", "peer15")
    assert [r.getMessage() for r in caplog.records] == [
        *(f"closing peer{i}: bad frame" for i in range(10)),
        "closing peer15: bad frame (5 similar lines dropped)"]
