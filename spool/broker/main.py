"""Running a broker process: logging, uvloop, signals, graceful shutdown.

``run(config)`` blocks until SIGINT or SIGTERM, then shuts the broker down
in order (stop accepting, finish in-flight requests, flush and close logs).
Once listening it prints one line to stdout,
``spool broker <node> listening on HOST:PORT``, which tests and scripts
read to learn an ephemeral port. A log dir the broker cannot own (locked by
another process, another node's or cluster's, not a log dir) raises
``LogDirError`` from ``run`` before anything was served.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import uvloop

from spool.broker.broker import Broker
from spool.broker.config import BrokerConfig
from spool.storage.logdirs import LogDirError

__all__ = ["LogDirError", "run", "serve"]  # LogDirError: the command reports it


async def serve(config: BrokerConfig, ready=None) -> None:
    import spool.broker.handlers  # noqa: F401  (registers every handler)

    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    for host, port in broker.server.bound:
        print(f"spool broker {broker.node_id} listening on {host}:{port}", flush=True)
    if ready is not None:
        ready(broker)
    await stop.wait()
    logging.getLogger("spool.broker").info("shutting down")
    await broker.shutdown()


def configure_logging(log_level: str = "INFO") -> None:
    """Log to stderr at ``log_level`` (DEBUG, INFO, WARNING, ERROR); once per process."""
    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def run(config: BrokerConfig, log_level: str = "INFO") -> None:
    configure_logging(log_level)
    uvloop.run(serve(config))
