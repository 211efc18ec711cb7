"""The registry's core parses stored schemas off the event loop.

After a start nothing stored is parsed yet, and the first registration compares the new
schema with every stored one of its type (ids are global). For PROTOBUF each parse is a
protoc run (~20-40 ms), so 40 stored schemas kept the loop from serving anything for
over a second; now they are parsed on a worker thread while the loop keeps running.
A real ``Store`` filled with ``_schemas`` records, a list-backed log, the real formats.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from spool.registry import store as records
from spool.registry.core import Core
from spool.registry.model import SchemaVersion
from spool.registry.store import Store


def proto(package: str) -> str:
    return f'syntax = "proto3";\npackage {package};\nmessage M {{ string a = 1; }}\n'


def test_first_registration_after_a_start_keeps_the_loop_running():
    tag = uuid.uuid4().hex[:8]  # texts this process has never parsed
    store = Store()
    stored = [SchemaVersion(f"s{i}", 1, i + 1, proto(f"w{tag}.p{i}"), "PROTOBUF")
              for i in range(40)]
    for sv in stored:
        store.apply(*records.schema_record(sv))
    written: list = []

    async def append(batch: list) -> None:
        for key, value in batch:
            written.append((key, value))
            store.apply(key, value)

    core = Core(store, append)

    async def run() -> tuple[int, int, float, float]:
        gaps: list[float] = []

        async def ticker() -> None:
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        tick = asyncio.ensure_future(ticker())
        await asyncio.sleep(0.02)
        started = time.monotonic()
        new_id = await core.register("new", proto(f"w{tag}.fresh"), "PROTOBUF", [])
        elapsed = time.monotonic() - started
        await asyncio.sleep(0.02)
        tick.cancel()
        # the same schema as a stored one, laid out otherwise: its id, found in the cache
        again = await core.register("other", proto(f"w{tag}.p7").replace("\n", "\n\n"),
                                    "PROTOBUF", [])
        return new_id, again, elapsed, max(gaps)

    new_id, again, elapsed, longest = asyncio.run(asyncio.wait_for(run(), 120))
    assert new_id == 41 and again == 8
    assert len(written) == 2
    # 40 protoc runs took `elapsed`; the loop was never held for more than a third of it
    assert elapsed > 0.3 and longest < elapsed / 3, (elapsed, longest)
