"""A broker whose coordinators append through a fault-injecting writer (tests only).

    python -m tests.helpers.faulty_broker --faults FILE [--override k=v ...] [--log-level L]

Runs the real broker (``spool.broker.main.run``) with a ``FaultyWriter``
around the production ``PartitionLogWriter`` (``spool.broker.coordinator_log``):
every coordinator append (``__consumer_offsets``, ``__transaction_state``,
transaction markers, transactional offsets) first consults FILE, a JSON
list of rules that the test may rewrite at any time::

    {"match": "offsets" | "marker" | "txn-prepare",
     "action": "fail" | "kill", "times": 1, "topic": "optional topic name"}

- ``offsets``: a non-control batch for ``__consumer_offsets``;
  ``marker``: a control batch (a COMMIT/ABORT marker), to any partition;
  ``txn-prepare``: a ``__transaction_state`` record in PrepareCommit or
  PrepareAbort.
- ``fail``: the append raises ``OSError(ENOSPC)`` and writes nothing;
  ``kill``: the append is written, then the process SIGKILLs itself.
- ``times``: how many matching appends the rule applies to (default 1);
  a file rewritten with other content starts counting afresh.

Each fault applied appends one line, ``<match> <action> <topic>-<partition>``,
to ``FILE.fired``: the test's evidence that its fault happened.

Production code has no crash hooks: this file is the only one.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
from pathlib import Path

from spool.broker.coordinator_log import PartitionLogWriter
from spool.coordinator.transaction import TxnState, decode_key, decode_value
from spool.records.batch import BatchHeader
from spool.records.record import iter_records

PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


class FaultyWriter:
    def __init__(self, inner, faults: Path) -> None:
        self.inner = inner
        self.faults = faults
        self._text = ""
        self._rules: list[dict] = []
        self._used: list[int] = []

    def _load(self) -> None:
        try:
            text = self.faults.read_text()
        except OSError:
            text = ""
        if text != self._text:
            self._text = text
            self._rules = json.loads(text) if text.strip() else []
            self._used = [0] * len(self._rules)

    def replicated(self, topic: str, partition: int, offset: int) -> bool:
        return self.inner.replicated(topic, partition, offset)

    async def wait_replicated(self, topic: str, partition: int, offset: int,
                              timeout_ms: int) -> None:
        await self.inner.wait_replicated(topic, partition, offset, timeout_ms)

    def append(self, topic: str, partition: int, batch: bytearray) -> int | None:
        self._load()
        kill = False
        for i, rule in enumerate(self._rules):
            if self._used[i] >= rule.get("times", 1) or not _matches(rule, topic, batch):
                continue
            self._used[i] += 1
            with open(f"{self.faults}.fired", "a") as f:
                f.write(f"{rule['match']} {rule['action']} {topic}-{partition}\n")
            if rule["action"] == "fail":
                raise OSError(errno.ENOSPC, f"injected: {rule['match']} append to {topic}-{partition}")
            kill = True
        last = self.inner.append(topic, partition, batch)
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)
        return last


def _matches(rule: dict, topic: str, batch: bytearray) -> bool:
    if rule.get("topic") not in (None, topic):
        return False
    control = BatchHeader.parse(batch).is_control
    kind = rule["match"]
    if kind == "marker":
        return control
    if kind == "offsets":
        return topic == "__consumer_offsets" and not control
    if kind == "txn-prepare":
        if topic != "__transaction_state":
            return False
        for rec in iter_records(batch):
            if rec.key is not None and rec.value is not None:
                txn_id = decode_key(bytes(rec.key))
                if decode_value(txn_id, bytes(rec.value)).state in PREPARE:
                    return True
        return False
    raise ValueError(f"unknown fault match {kind!r}")


def main() -> None:
    from spool.broker.config import BrokerConfig
    from spool.broker.main import run

    parser = argparse.ArgumentParser()
    parser.add_argument("--faults", type=Path, required=True)
    parser.add_argument("--override", "-o", action="append", default=[])
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args()
    cfg = BrokerConfig.load(None, args.override)
    if cfg.unknown:  # as --strict-config
        raise SystemExit(f"unknown configuration keys: {', '.join(cfg.unknown)}")
    run(cfg, args.log_level, lambda broker: FaultyWriter(PartitionLogWriter(broker), args.faults))


if __name__ == "__main__":
    main()
