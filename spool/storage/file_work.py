"""Deferred file work of the partition logs, done off the caller's thread (the event loop).

One worker thread runs the jobs in submission order: writing a rolled
segment's index files, writing producer-state snapshots, preparing the
next segment's empty ``.log`` ahead of a roll. Every job writes a cache or
a preparation, never something an acknowledgement depends on: if the
process dies first, the loader rebuilds the indexes, replays the log
instead of the snapshot, and removes the prepared ``*.tmp`` file. A job's
failure (a full disk) is logged and changes nothing else.

``PartitionLog`` keeps the futures of its own jobs and waits for them
before it closes, deletes or truncates (``wait``), and a log being opened
waits for all jobs queued so far (``drain``): no job of an earlier instance
of its directory (a test's simulated crash) runs under its load. Jobs never
wait on each other, so waiting from any thread but the worker's is safe.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

log = logging.getLogger(__name__)

_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spool-file-work")


def _run(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:  # a cache or a preparation: log it, the log goes on without it
        log.exception("deferred file work failed: %r", fn)


def submit(fn: Callable[[], object]) -> Future:
    return _POOL.submit(_run, fn)


def drain() -> None:
    """Wait until every job submitted so far ran (one worker: a no-op queued last)."""
    if threading.current_thread().name.startswith("spool-file-work"):
        return
    _POOL.submit(lambda: None).result()


def wait(futures: list[Future]) -> None:
    """Wait until every job in ``futures`` ran (their failures were logged)."""
    for f in futures:
        f.result()
