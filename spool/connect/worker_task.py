"""A task's life on its own thread: what source and sink tasks share (Kafka's WorkerTask).

Lifecycle: ``WorkerTask(...)`` -> ``start()`` runs ``_run`` on a thread named after the
task: ``initialize()`` (build the plugin task, clients, converters; ``task.start``),
then status RUNNING (or PAUSED when the target state is PAUSED), then ``execute()``
until ``stop()`` is called; then ``close()`` always (a final commit, the clients
closed, ``task.stop``) and status UNASSIGNED, or FAILED with the trace when
``initialize``/``execute`` raised. ``transition_to(state)`` switches between STARTED and
PAUSED: the subclass's loop calls ``check_paused`` and waits in ``await_unpaused`` (a
source task flushes what it sent and stops polling; a sink task pauses its consumer's
partitions and keeps polling so the group keeps it); the status becomes PAUSED once
that is done, RUNNING when it resumes.

Concurrency: ``start``, ``stop``, ``transition_to``, ``await_stop`` and ``cancel`` are
called from the worker (any thread); everything else runs on the task's thread. A
cancelled task (abandoned after ``task.shutdown.graceful.timeout.ms``) reports no status
when it eventually ends, since another instance may already run the same task id.
"""

from __future__ import annotations

import logging
import threading
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spool.connect.herder import TaskId
    from spool.connect.worker import StatusListener, Worker

log = logging.getLogger(__name__)


class WorkerTask:
    """Base of ``source_task.WorkerSourceTask`` and ``sink_task.WorkerSinkTask``."""

    def __init__(self, worker: Worker, task_id: TaskId, connector_props: dict[str, str],
                 task_props: dict[str, str], status: StatusListener,
                 target_state: str) -> None:
        self.worker = worker
        self.connector_props = connector_props
        self.task_props = task_props
        self.id = task_id
        self._status = status
        self._target = target_state
        self._cond = threading.Condition()
        self._stopping = False
        self.cancelled = False
        self._reported: str | None = None
        self.failed = False  # set before close() when initialize/execute raised
        self._thread = threading.Thread(target=self._run, name=f"connect-task-{task_id}",
                                        daemon=True)

    # ---- called by the worker

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the task to stop (returns at once; ``await_stop`` waits)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self.on_stop()

    def await_stop(self, timeout: float | None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def cancel(self) -> None:
        self.cancelled = True

    def transition_to(self, state: str) -> None:
        """``STARTED`` or ``PAUSED`` (``STOPPED`` tasks are stopped by the herder); the
        task's thread reports the new status once it has paused or resumed."""
        with self._cond:
            self._target = state
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---- for subclasses

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def paused(self) -> bool:
        return self._target == "PAUSED"

    def await_unpaused(self, timeout: float | None = None) -> bool:
        """Wait while paused (up to ``timeout``); True when running and not stopping."""
        with self._cond:
            if self._target == "PAUSED" and not self._stopping:
                self._cond.wait(timeout)
            return self._target != "PAUSED" and not self._stopping

    def check_paused(self) -> bool:
        """On the task's thread: True while paused. Entering the pause runs ``on_pause``
        (what was sent is flushed) then reports PAUSED; leaving it reports RUNNING."""
        if self.paused and not self._stopping:
            if self._reported != "PAUSED":
                self.on_pause()
                self._report("PAUSED")
            return True
        if self._reported == "PAUSED" and not self._stopping:
            self._report("RUNNING")
        return False

    def on_pause(self) -> None:
        pass

    def sleep(self, seconds: float) -> None:
        """Sleep, waking early when stopped."""
        with self._cond:
            if not self._stopping:
                self._cond.wait(seconds)

    def initialize(self) -> None:
        raise NotImplementedError

    def execute(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def on_stop(self) -> None:
        """Called from the stopping thread (a source task's ``stop()`` wakes its poll)."""

    # ---- the thread

    def _run(self) -> None:
        failed = False
        try:
            if not self._stopping:
                self.initialize()
                self._report("PAUSED" if self.paused else "RUNNING")
                self.execute()
        except Exception:
            failed = self.failed = True
            trace = traceback.format_exc()
            log.error("%s failed:\n%s", self._label(), trace)
            self._report("FAILED", trace)
        finally:
            try:
                self.close()
            except Exception:
                log.exception("%s: error while closing", self._label())
            if not failed:
                self._report("UNASSIGNED")

    def _label(self) -> str:
        return f"{type(self).__name__}{{id={self.id}}}"

    def _report(self, state: str, trace: str | None = None) -> None:
        if self.cancelled:
            return
        self._reported = state
        try:
            self._status.task_status(self.id, state, trace)
        except Exception:
            log.exception("%s: status listener failed for %s", self._label(), state)
