"""Running a broker process: logging, uvloop, signals, graceful shutdown.

``run(config)`` first raises the open files limit (RLIMIT_NOFILE) from its
soft to its hard value, as every connection and segment needs descriptors,
and logs both. It blocks until SIGINT or SIGTERM, then shuts the broker down
in order (stop accepting, finish in-flight requests, flush and close logs).
Once listening it prints one line to stdout,
``spool broker <node> listening on HOST:PORT (LISTENER)`` per listener, in
the order of ``listeners``, then ``spool broker <node> listening on http://HOST:PORT
(WHAT)`` per HTTP endpoint (``admin``, ``metrics`` per metrics listener, ``console``),
which tests and scripts read to learn ephemeral ports; with ``schema.registry.listeners``,
``spool registry listening on http://HOST:PORT (registry)`` once the registry has read
its topic (later: it is a client of the broker). The log does not say them again
(its ``broker N started`` line carries them as fields). A log dir the broker cannot own (locked by
another process, another node's or cluster's, not a log dir) raises
``LogDirError`` from ``run`` before anything was served.

``run`` also raises the cyclic garbage collector's first threshold from 700 to
``GC_THRESHOLDS[0]`` tracked objects (the process's own setting; an embedded broker leaves
its host's alone). A Produce or Fetch over 1,000 partitions keeps tens of thousands of
objects alive while in flight: at 700, each of them outlived two collections and reached
the oldest generation, whose full collections (nothing to collect, 100-250 ms over the
broker's heap) ran every ~2 s and stalled the event loop. Reference counting frees
nearly everything; the collector only looks for cycles, now less often.

``format_storage(config, cluster_id)`` is ``spool storage format`` (Kafka's
``kafka-storage format``): ``meta.properties`` into every log dir and the
``metadata.log.dir``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import signal
from collections.abc import Sequence
from typing import Any

import uvloop

from spool.broker.broker import Broker
from spool.broker.config import BrokerConfig
from spool.cluster.bootstrap import write_bootstrap
from spool.storage.logdirs import LogDirError, format_log_dirs
from spool.util import logs

__all__ = ["LogDirError", "format_storage", "node_dirs", "run", "serve"]  # LogDirError: commands report it


async def serve(config: BrokerConfig, ready=None, coordinator_writer=None) -> None:
    import spool.broker.handlers  # noqa: F401  (registers every handler)

    broker = Broker(config, coordinator_writer=coordinator_writer)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:  # binds before the lines below: an address it cannot have fails the start
        registry = _start_registry(broker)
    except BaseException:
        await broker.shutdown()
        raise
    for name, (host, port) in broker.server.bound_listeners.items():
        print(f"spool broker {broker.node_id} listening on {host}:{port} ({name})", flush=True)
    for what, url in broker.http_endpoints():
        print(f"spool broker {broker.node_id} listening on {url} ({what})", flush=True)
    if ready is not None:
        ready(broker)
    await stop.wait()
    logging.getLogger("spool.broker").info("shutting down")
    if registry is not None:  # a client of this broker: first to go
        await asyncio.to_thread(registry.stop)
    await broker.shutdown()


def _start_registry(broker: Broker) -> Any:
    """``schema.registry.listeners``: the schema registry on a thread and event loop of
    its own, a Kafka client of this broker's first PLAINTEXT listener (as ``spool
    registry`` would be). It prints ``spool registry listening on http://HOST:PORT
    (registry)`` once it has read ``_schemas``. None when the key is unset."""
    listen = broker.config.get("schema.registry.listeners")
    if not listen:
        return None
    plain = [lst for lst in broker.cluster.broker_listeners if lst.protocol == "PLAINTEXT"]
    if not plain:
        logging.getLogger("spool.broker").error(
            "schema.registry.listeners is set but no broker listener is PLAINTEXT: the "
            "schema registry does not start")
        return None
    from spool.registry.service import RegistryThread  # aiohttp and confluent-kafka: on ask

    host, port = broker.server.bound_listeners[plain[0].name]
    host = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
    return RegistryThread({"bootstrap.servers": f"{host}:{port}", "log_level": 0}, listen,
                          advertised_url=broker.config.get("schema.registry.advertised.url"),
                          group_id=broker.config.get("schema.registry.group.id")).start()


def configure_logging(log_level: str = "INFO", log_format: str = "text") -> None:
    """Log to stderr at ``log_level``, a spec of ``spool.util.logs``
    (``INFO,spool.storage=DEBUG``), in ``log_format`` (text or json)."""
    logs.configure(log_level, log_format)


GC_THRESHOLDS = (50_000, 10, 10)  # gen0 objects, then Python's defaults (module doc)


def raise_open_files_limit() -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; returns (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft
    return soft, target


def run(config: BrokerConfig, log_level: str | None = None, coordinator_writer=None,
        log_format: str = "text") -> None:
    """Serve until SIGINT/SIGTERM. ``log_level``: a spec, default the ``log.level`` key.
    ``coordinator_writer(broker)``: see ``Broker`` (tests only)."""
    configure_logging(log_level or config.get("log.level") or "INFO", log_format)
    gc.set_threshold(*GC_THRESHOLDS)
    before, after = raise_open_files_limit()
    logging.getLogger("spool.broker").info(
        "open files limit: %d (soft limit was %d)", after, before)
    uvloop.run(serve(config, coordinator_writer=coordinator_writer))


def node_dirs(config: BrokerConfig) -> list[str]:
    """The dirs a node owns: ``log.dirs``, then ``metadata.log.dir`` if it is another."""
    dirs = list(config.log_dirs)
    meta = config.cluster.metadata_log_dir
    if os.path.abspath(meta) not in {os.path.abspath(d) for d in dirs}:
        dirs.append(meta)
    return dirs


def format_storage(
    config: BrokerConfig, cluster_id: str | None = None, *, ignore_formatted: bool = False,
    bootstrap_records: Sequence[Any] = (),
) -> list:
    """Format ``config``'s dirs (``node_dirs``) for its node.id with ``cluster_id``
    (default: the configured ``cluster.id``); returns the dirs written. LogDirError on
    refusal. ``bootstrap_records`` (``--add-scram``'s credentials) go into the metadata
    dir's bootstrap file (``spool.cluster.bootstrap``) when it is formatted now: the
    first start of the cluster (or single node) writes them into its metadata."""
    configured = config.values.get("cluster.id")
    if cluster_id and configured and cluster_id != configured:
        raise LogDirError(f"--cluster-id {cluster_id} differs from the configured "
                          f"cluster.id={configured}")
    cid = cluster_id or configured
    if not cid:
        raise LogDirError("You must specify the cluster id (--cluster-id; "
                          "`spool storage random-uuid` prints a new one).")
    written = format_log_dirs(node_dirs(config), config.node_id, cid,
                              ignore_formatted=ignore_formatted)
    meta = os.path.abspath(config.cluster.metadata_log_dir)
    if bootstrap_records and meta in {os.path.abspath(d) for d in written}:
        write_bootstrap(meta, bootstrap_records)
    return written
