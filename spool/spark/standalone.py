"""A Spark standalone cluster and a Spark Connect server from the pyspark wheel, on loopback.

``StandaloneCluster(base_dir, workers=2)`` runs what the pyspark wheel alone
(plus Java 17) gives, no Spark download: ``bin/spark-class
org.apache.spark.deploy.master.Master`` and ``workers`` x
``...deploy.worker.Worker`` (``worker_cores`` cores and ``worker_memory``
each), every process bound to 127.0.0.1 on free ports, and on demand the
Spark Connect server through ``sbin/start-connect-server.sh`` (``master`` =
this cluster's, Python data source and UDF workers on ``python``, so a
``pyspark_spool`` importable there makes ``format("spool")`` work over
Connect).

Everything lives under ``base_dir``: ``conf/`` (SPARK_CONF_DIR: a quiet
``log4j2.properties``, WARN but for the master's, workers' and Connect
server's own lines, and a ``spark-defaults.conf`` with
``spark.executor.memory`` and the event log on), ``events/`` (every
application's event log, the Connect server's too), ``logs/`` (one ``.out``
per process), ``work/worker-N`` (each worker's work dir: ``<app
id>/<executor id>/stderr`` of every executor it ran), ``local/`` (scratch, also the processes'
``TMPDIR``), ``pids/`` and ``state.json`` (urls, process groups), so
``StandaloneCluster.load(base_dir).stop()`` from another process stops it.

Every port is the kernel's pick (port 0), read back from the process's own log line
(``Starting Spark master at``, ``Bound MasterWebUI``, ``Spark Connect server started
at``) rather than picked free beforehand: a port picked free and bound later can be taken
meanwhile (by the Spool cluster a test starts beside it), and Spark then moves its web UI
to the next port, where something else answers. ``start()`` returns once the master's
JSON (``webui_url + "/json/"``) lists every worker ALIVE; ``start_connect()`` once the
Connect port accepts. Each
process starts in its own process group (executors and Python workers are
its children): ``stop()`` SIGTERMs every group, then SIGKILLs what is left,
so nothing is left behind. ``driver_env()`` is what a driver process needs
(``SPARK_CONF_DIR``, ``SPARK_LOCAL_IP``, ``PYSPARK_PYTHON``); ``master_state()``,
``apps()``, ``executor_dirs(app_id)``, ``events(app_id)`` and
``tasks_by_worker(app_id)`` answer what ran where.

``jvm_options`` (e.g. ``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC``, what the tests use:
short-lived JVMs on few cores spend less on JIT and GC threads) go to every JVM: the
daemons through ``SPARK_DAEMON_JAVA_OPTS``, drivers and executors through
``spark.{driver,executor}.defaultJavaOptions`` (in ``conf/spark-defaults.conf`` and the
Connect server's settings), which Spark puts before an application's own
``extraJavaOptions``.

The Connect server uses dynamic allocation (executors given back after a few
idle seconds): with 1-core workers a server holding its executors for its
whole life would starve every other application of cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "state.json"
# what the daemons log once bound (their loggers are at INFO in _LOG4J)
MASTER_PORT_LINE = re.compile(r"Starting Spark master at spark://[^:\s]+:(\d+)")
WEBUI_PORT_LINE = re.compile(r"Bound MasterWebUI to \S+ and started at http://[^:\s]+:(\d+)")
CONNECT_PORT_LINE = re.compile(r"Spark Connect server started at: [^:\s]+:(\d+)")

_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
logger.master.name = org.apache.spark.deploy
logger.master.level = info
logger.connect.name = org.apache.spark.sql.connect.service
logger.connect.level = info
"""

# Variables that must not leak from the caller into the daemons: SPARK_MASTER makes
# sbin/spark-daemon.sh rsync SPARK_HOME from "$SPARK_MASTER" over ssh.
_UNSET = ("SPARK_MASTER", "SPARK_REMOTE", "SPARK_CONNECT_MODE", "SPARK_HOME", "SPARK_CONF_DIR",
          "SPARK_ENV_LOADED", "PYSPARK_SUBMIT_ARGS")


class SparkClusterError(RuntimeError):
    """A process did not start or did not become ready; the message holds its log tail."""


def spark_home() -> Path:
    """The pyspark wheel's directory: it holds ``bin/``, ``sbin/`` and ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _stop_groups(pgids: list[int], timeout: float = 15.0) -> None:
    """SIGTERM every group (Spark's shutdown hooks run), SIGKILL whatever is left."""
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_group_alive(g) for g in pgids):
        time.sleep(0.1)
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


@dataclass
class StandaloneCluster:
    base_dir: Path
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    executor_memory: str = "640m"
    daemon_memory: str = "256m"
    connect_driver_memory: str = "640m"
    python: str = sys.executable
    jvm_options: str = ""  # for every JVM of the cluster and its applications (see start())
    master_port: int = 0
    webui_port: int = 0
    connect_port: int = 0
    groups: dict[str, int] = field(default_factory=dict)  # process name -> process group id
    _procs: list[subprocess.Popen] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.base_dir = Path(self.base_dir).resolve()

    # --- layout -------------------------------------------------------------------------

    @property
    def conf_dir(self) -> Path:
        return self.base_dir / "conf"

    @property
    def log_dir(self) -> Path:
        return self.base_dir / "logs"

    @property
    def local_dir(self) -> Path:
        return self.base_dir / "local"

    def work_dir(self, n: int) -> Path:
        return self.base_dir / "work" / f"worker-{n}"

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    @property
    def connect_url(self) -> str:
        if not self.connect_port:
            raise SparkClusterError("the Spark Connect server is not started (start_connect())")
        return f"sc://127.0.0.1:{self.connect_port}"

    def _prepare(self) -> None:
        for d in (self.conf_dir, self.log_dir, self.local_dir, self.base_dir / "pids"):
            d.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "log4j2.properties").write_text(_LOG4J)
        self.event_dir.mkdir(parents=True, exist_ok=True)
        defaults = {
            "spark.executor.memory": self.executor_memory,
            **self._event_log_confs(),
            **self._jvm_confs(),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": self.python,
        }
        (self.conf_dir / "spark-defaults.conf").write_text(
            "".join(f"{k} {v}\n" for k, v in defaults.items()))

    @property
    def event_dir(self) -> Path:
        return self.base_dir / "events"

    def _event_log_confs(self) -> dict[str, str]:
        return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file:{self.event_dir}",
                "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}

    def _jvm_confs(self) -> dict[str, str]:
        """``jvm_options`` for drivers and executors: the ``defaultJavaOptions`` that Spark puts
        before an application's own ``extraJavaOptions``."""
        if not self.jvm_options:
            return {}
        return {"spark.driver.defaultJavaOptions": self.jvm_options,
                "spark.executor.defaultJavaOptions": self.jvm_options}

    def _env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _UNSET}
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_CONF_DIR=str(self.conf_dir),
            SPARK_LOG_DIR=str(self.log_dir),
            SPARK_PID_DIR=str(self.base_dir / "pids"),
            SPARK_IDENT_STRING="spool",
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_DIRS=str(self.local_dir),
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            PYSPARK_PYTHON=self.python,
            PYSPARK_DRIVER_PYTHON=self.python,
            TMPDIR=str(self.local_dir),
        )
        if self.jvm_options:  # the master's, workers' and Connect server's own JVMs
            env["SPARK_DAEMON_JAVA_OPTS"] = self.jvm_options
        env.update(extra)
        return env

    def driver_env(self) -> dict[str, str]:
        """For a driver process (``spark-submit``, ``python -m examples...``) on this
        cluster: its spark-defaults.conf (executor memory), loopback, the venv's python."""
        return {"SPARK_CONF_DIR": str(self.conf_dir), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": self.python}

    def _launch(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = self.log_dir / f"{name}.out"
        with open(log, "ab") as out:
            out.write(f"==== {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n".encode())
            out.flush()
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, cwd=self.base_dir,
                                    start_new_session=True)
        self._procs.append(proc)
        self.groups[name] = proc.pid
        self._save()
        return proc

    # --- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        """Start the master and the workers; return once every worker is ALIVE."""
        self._prepare()
        spark_class = str(spark_home() / "bin" / "spark-class")
        try:
            # No REST submission server: it would bind port 6066 on every master.
            self._launch("master", [spark_class, MASTER_CLASS, "--host", "127.0.0.1",
                                    "--port", str(self.master_port),
                                    "--webui-port", str(self.webui_port)],
                         self._env(SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false"))
            self._wait("the master's ports in its log", self._master_bound, timeout)
            self._save()
            for n in range(1, self.workers + 1):
                work = self.work_dir(n)
                work.mkdir(parents=True, exist_ok=True)
                self._launch(f"worker-{n}", [
                    spark_class, WORKER_CLASS, "--host", "127.0.0.1", "--port", "0",
                    "--webui-port", "0", "--cores", str(self.worker_cores),
                    "--memory", self.worker_memory, "--work-dir", str(work), self.master_url,
                ], self._env(SPARK_WORKER_DIR=str(work)))
            self._wait("every worker ALIVE at the master", self._workers_alive, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_connect(self, timeout: float = 120.0) -> str:
        """Start the Spark Connect server (``sbin/start-connect-server.sh``) on this
        cluster; return its ``sc://`` url once it accepts connections."""
        if self.connect_port and _group_alive(self.groups.get("connect", 0) or -1):
            return self.connect_url
        self.connect_port = 0
        sbin = spark_home() / "sbin"
        confs = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": "0",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.pyspark.python": self.python,
            "spark.pyspark.driver.python": self.python,
            "spark.local.dir": str(self.local_dir),
            "spark.executor.memory": self.executor_memory,
            "spark.sql.shuffle.partitions": "2",
            **self._event_log_confs(),
            **self._jvm_confs(),
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={self.local_dir}",
            # Give the cores back when idle: other applications share these workers.
            "spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.shuffleTracking.enabled": "true",
            "spark.dynamicAllocation.shuffleTracking.timeout": "10s",
            "spark.dynamicAllocation.executorIdleTimeout": "5s",
            "spark.dynamicAllocation.minExecutors": "0",
        }
        cmd = [str(sbin / "start-connect-server.sh"), "--master", self.master_url,
               "--driver-memory", self.connect_driver_memory]
        for k, v in confs.items():
            cmd += ["--conf", f"{k}={v}"]
        # The launcher sizes the Connect server's heap (a daemon, for it) by SPARK_DAEMON_MEMORY.
        proc = self._launch("connect", cmd,
                            self._env(SPARK_DAEMON_MEMORY=self.connect_driver_memory))
        try:
            if proc.wait(timeout) != 0:
                raise SparkClusterError(f"start-connect-server.sh exited {proc.returncode}:\n"
                                        f"{_tail(self.log_dir / 'connect.out')}")
            self._wait("the Spark Connect server accepting connections",
                       self._connect_accepts, timeout)
        except BaseException:
            _stop_groups([self.groups.pop("connect")])
            self.connect_port = 0
            self._save()
            raise
        self._save()
        return self.connect_url

    def stop(self, grace: float = 15.0) -> None:
        """Stop every process this cluster started: SIGTERM to every process group (Spark's
        shutdown hooks run), SIGKILL to what is left after ``grace`` seconds; reap them."""
        order = sorted(self.groups, key=lambda n: (n != "connect", n == "master"))
        _stop_groups([self.groups[n] for n in order], grace)
        for p in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)
        self._procs.clear()
        self.groups.clear()
        self.connect_port = 0
        with contextlib.suppress(FileNotFoundError):
            (self.base_dir / STATE_FILE).unlink()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- state across processes (examples.spark_cluster up|down) ------------------------

    def _save(self) -> None:
        state = {"master": self.master_url, "webui": self.webui_url,
                 "connect": f"sc://127.0.0.1:{self.connect_port}" if self.connect_port else None,
                 "master_port": self.master_port, "webui_port": self.webui_port,
                 "connect_port": self.connect_port, "groups": self.groups,
                 "workers": self.workers, "python": self.python}
        (self.base_dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    @classmethod
    def load(cls, base_dir: str | os.PathLike) -> StandaloneCluster:
        """The cluster ``start()`` left in ``base_dir`` (from another process)."""
        base = Path(base_dir)
        try:
            state = json.loads((base / STATE_FILE).read_text())
        except FileNotFoundError:
            raise SparkClusterError(f"no Spark cluster state in {base} ({STATE_FILE} "
                                    "missing)") from None
        return cls(base, workers=state["workers"], python=state["python"],
                   master_port=state["master_port"], webui_port=state["webui_port"],
                   connect_port=state["connect_port"], groups=dict(state["groups"]))

    def running(self) -> dict[str, bool]:
        """Each process group this cluster started: alive or not."""
        return {name: _group_alive(pgid) for name, pgid in self.groups.items()}

    # --- asking -------------------------------------------------------------------------

    def master_state(self, timeout: float = 5.0) -> dict:
        """The master's JSON: ``workers`` (state, cores, memory, webuiaddress),
        ``activeapps``, ``completedapps``."""
        with urllib.request.urlopen(self.webui_url + "/json/", timeout=timeout) as r:
            return json.load(r)

    def apps(self) -> list[dict]:
        """Every application the master knows, active and completed."""
        s = self.master_state()
        return [*s.get("activeapps", []), *s.get("completedapps", [])]

    def executor_dirs(self, app_id: str) -> dict[int, list[Path]]:
        """Worker number -> the executor dirs (``work/worker-N/<app id>/<executor id>``)
        that worker made for ``app_id``: each executor's stdout/stderr is there."""
        return {n: sorted(p for p in (self.work_dir(n) / app_id).glob("*") if p.is_dir())
                for n in range(1, self.workers + 1)}

    def events(self, app_id: str) -> list[dict]:
        """The application's event log so far (``events/<app id>[.inprogress]``; Spark
        flushes it at each stage and job end): one dict per listener event."""
        for name in (app_id, app_id + ".inprogress"):
            with contextlib.suppress(FileNotFoundError):
                text = (self.event_dir / name).read_text()
                return [json.loads(line) for line in text.splitlines()
                        if line.strip() and line.endswith("}")]
        return []

    def tasks_by_worker(self, app_id: str) -> dict[int | str, int]:
        """The tasks of ``app_id`` that ended, per worker number that ran their executor
        (from the event log and the workers' work dirs); a task run anywhere else (the
        driver in local mode) counts under its executor id, as a string."""
        where = {d.name: n for n, dirs in self.executor_dirs(app_id).items() for d in dirs}
        out: dict[int | str, int] = {n: 0 for n in range(1, self.workers + 1)}
        for e in self.events(app_id):
            if e.get("Event") == "SparkListenerTaskEnd":
                ex = e["Task Info"]["Executor ID"]
                key = where.get(ex, ex)
                out[key] = out.get(key, 0) + 1
        return out

    def _launched_log(self, name: str) -> str:
        """What process ``name`` logged since its last launch (``_launch``'s header line)."""
        text = _tail(self.log_dir / f"{name}.out", 1 << 20)
        return text[text.rfind("\n==== ") + 1:]

    def _master_bound(self) -> bool | str:
        if not _pid_alive(self.groups["master"]):
            return f"master exited:\n{_tail(self.log_dir / 'master.out')}"
        log = self._launched_log("master")
        rpc, webui = MASTER_PORT_LINE.search(log), WEBUI_PORT_LINE.search(log)
        if rpc is None or webui is None:
            return "not yet bound"
        self.master_port, self.webui_port = int(rpc[1]), int(webui[1])
        return True

    def _workers_alive(self) -> bool | str:
        for name, pgid in self.groups.items():
            if name != "connect" and not _pid_alive(pgid):
                return f"{name} exited:\n{_tail(self.log_dir / f'{name}.out')}"
        try:
            workers = self.master_state(timeout=2).get("workers", [])
        except OSError as e:
            return f"master web UI: {e}"
        alive = [w for w in workers if w.get("state") == "ALIVE"]
        return len(alive) >= self.workers or f"{len(alive)} of {self.workers} workers alive"

    def _connect_accepts(self) -> bool | str:
        pid_file = self.base_dir / "pids" / (
            "spark-spool-org.apache.spark.sql.connect.service.SparkConnectServer-1.pid")
        with contextlib.suppress(OSError, ValueError):
            if not _pid_alive(int(pid_file.read_text())):
                return f"the Connect server exited:\n{self._connect_log()}"
        if not self.connect_port:
            bound = CONNECT_PORT_LINE.search(self._connect_log(1 << 20))
            if bound is None:
                return "its port not yet in its log"
            self.connect_port = int(bound[1])
        try:
            socket.create_connection(("127.0.0.1", self.connect_port), timeout=1).close()
        except OSError as e:
            return f"port {self.connect_port}: {e}"
        return True

    def _connect_log(self, n: int = 3000) -> str:
        """The Connect server's log (sbin/spark-daemon.sh rotates it at each start)."""
        logs = sorted(self.log_dir.glob("spark-spool-org.apache.spark.sql.connect*.out"))
        return _tail(logs[-1], n) if logs else _tail(self.log_dir / "connect.out", n)

    def _wait(self, what: str, probe, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            got = probe()
            if got is True:
                return
            if isinstance(got, str) and "exited" in got:
                raise SparkClusterError(f"{what}: {got}")
            if time.monotonic() > deadline:
                raise SparkClusterError(f"{what}: not within {timeout} s; last: {got}")
            time.sleep(0.2)

    def logs(self, n: int = 2000) -> str:
        """The tail of every process's log."""
        return "\n".join(f"----- {p.name}\n{_tail(p, n)}" for p in sorted(self.log_dir.glob("*.out")))
