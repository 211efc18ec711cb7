"""Waiting on asyncio events without losing a cancellation.

``wait_event(event, timeout_s)`` waits until ``event`` is set (True) or ``timeout_s``
passes (False; ``None`` waits for ever). Python 3.11's ``asyncio.wait_for`` swallows
a cancellation that arrives in the same loop iteration as the event it waits on is
set: it returns as if woken, and a loop that was being stopped goes on (a broker hung
at shutdown this way, 742c5de). ``asyncio.timeout`` does not: the cancellation is
raised. Every "sleep until woken or until a deadline" loop uses this.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout_s: float | None) -> bool:
    """True once ``event`` is set, False after ``timeout_s``; CancelledError always propagates."""
    if event.is_set():
        return True
    if timeout_s is None:
        await event.wait()
        return True
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True
