"""config/server.properties, the commented example `make run` uses: every key in it
(set or commented out) is one the broker knows, and what it sets is the default except
the endpoints `make run` turns on."""

from __future__ import annotations

import re
from pathlib import Path

from spool.broker.config import BrokerConfig, known_key

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "server.properties"
TURNED_ON = {"metrics.listeners": "http://127.0.0.1:9404",
             "console.listeners": "http://127.0.0.1:8080",
             "schema.registry.listeners": "http://127.0.0.1:8081"}
SYNONYM = {"log.retention.hours": "log.retention.ms"}  # the key that says the value


def test_make_run_uses_the_example():
    run = re.search(r"^run:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert run and run.group(1) == "$(BIN)/spool broker --config config/server.properties"


def test_every_key_is_known_and_set_to_its_default_but_the_endpoints():
    text = EXAMPLE.read_text()
    cfg = BrokerConfig.load(EXAMPLE)
    assert cfg.unknown == []
    set_keys = dict(re.findall(r"^([a-z][a-z0-9.]*)=(.*)$", text, re.M))
    commented = re.findall(r"^#([a-z][a-z0-9.]*)=", text, re.M)
    assert set_keys and commented
    assert [k for k in [*set_keys, *commented] if not known_key(k)] == []
    defaults = BrokerConfig()
    assert {k: cfg.get(k) for k in TURNED_ON} == TURNED_ON
    effective = [SYNONYM.get(k, k) for k in set_keys if k not in TURNED_ON]
    assert {k: cfg.get(k) for k in effective} == {k: defaults.get(k) for k in effective}
