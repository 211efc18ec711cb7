"""Deferred file work of the partition logs, done off the caller's thread (the event loop).

One worker thread runs the jobs in submission order: writing a rolled
segment's index files, writing producer-state snapshots, preparing the
next segment's empty ``.log`` ahead of a roll, the fsyncs of a leader epoch
checkpoint an append changed (``spool.storage.leader_epoch``). Every job writes a cache or
a preparation, never something an acknowledgement depends on: if the
process dies first, the loader rebuilds the indexes, replays the log
instead of the snapshot, and removes the prepared ``*.tmp`` file. A job's
failure (a full disk) is logged and changes nothing else.

``PartitionLog`` keeps the futures of its own jobs and waits for them
before it closes, deletes or truncates (``wait``), and a log being opened
waits for all jobs queued so far (``drain``): no job of an earlier instance
of its directory (a test's simulated crash) runs under its load. Jobs never
wait on each other, so waiting from any thread but the worker's is safe.
Jobs are numbered as they are queued and the worker counts those it finished (one worker,
first in first out), so ``drain`` with nothing queued returns at once: opening thousands of
logs at start-up does not hand a no-op job to the worker and wait for it once per log.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

log = logging.getLogger(__name__)

_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spool-file-work")
_submit_lock = threading.Lock()  # numbering and queueing as one: numbers follow queue order
_queued = 0  # jobs queued so far
_finished = 0  # jobs the worker finished (jobs 1.._finished, in queue order); worker-written


def _run(fn: Callable[[], object]) -> None:
    global _finished
    try:
        fn()
    except Exception:  # a cache or a preparation: log it, the log goes on without it
        log.exception("deferred file work failed: %r", fn)
    finally:
        _finished += 1


def submit(fn: Callable[[], object]) -> Future:
    global _queued
    with _submit_lock:
        _queued += 1
        return _POOL.submit(_run, fn)


def drain() -> None:
    """Wait until every job submitted so far ran (one worker: a no-op queued last; none
    when every job queued so far has finished)."""
    if _finished >= _queued:  # jobs finish in queue order: all queued so far are done
        return
    if threading.current_thread().name.startswith("spool-file-work"):
        return
    submit(lambda: None).result()


def wait(futures: list[Future]) -> None:
    """Wait until every job in ``futures`` ran (their failures were logged)."""
    for f in futures:
        f.result()
