"""spool.util.aio.wait_event: woken, timed out, and a cancellation that races a wake-up."""

from __future__ import annotations

import asyncio

import pytest

from spool.util.aio import wait_event


def test_woken_and_timed_out() -> None:
    async def main() -> tuple[bool, bool]:
        ev = asyncio.Event()
        asyncio.get_running_loop().call_later(0.01, ev.set)
        woken = await wait_event(ev, 5)
        ev.clear()
        return woken, await wait_event(ev, 0.01)

    assert asyncio.run(main()) == (True, False)


@pytest.mark.parametrize("timeout_s", [10.0, None])
def test_a_cancellation_landing_as_the_event_is_set_stops_the_loop(timeout_s) -> None:
    """The loop is woken and cancelled in the same iteration (a stop that first detaches
    work, which wakes the loop): it must end, not go round again."""

    async def main() -> int:
        ev = asyncio.Event()
        rounds = 0

        async def loop() -> None:
            nonlocal rounds
            while True:
                ev.clear()
                await wait_event(ev, timeout_s)
                rounds += 1

        task = asyncio.create_task(loop())
        await asyncio.sleep(0)
        ev.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 2)
        return rounds

    assert asyncio.run(main()) == 0
