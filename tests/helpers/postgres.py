"""A real PostgreSQL server for tests: ``PostgresServer``.

``PostgresServer(base_dir).start()`` runs ``initdb`` into ``base_dir/data`` (trust auth,
superuser ``postgres``), then ``postgres`` on a free loopback port with
``wal_level=logical`` (and room for replication slots and senders), its socket in
``base_dir``; ``start`` returns once it accepts connections. ``dsn(db)`` is a libpq
connection string, ``url(db)`` the ``jdbc:postgresql://host:port/db`` form the
connectors' configs take, ``create_database(name)`` makes one more database. ``kill()``
is kill -9, ``stop()`` a fast shutdown; ``stop`` is idempotent. As root, ``base_dir``'s
parents must be open to the ``postgres`` user: ``PostgresServer.in_temp_dir()``.

The binaries come from ``pg_config --bindir``, else the newest
``/usr/lib/postgresql/<version>/bin`` (Debian's ``postgresql`` package, which ``.ci/run``
installs), else ``PATH``. PostgreSQL refuses to run as root: as root, the data
directory is given to the ``postgres`` user (Debian's package creates it) and the
server runs as that user (``Popen(user=...)``, so kill -9 reaches the server itself).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.helpers.child_proc import ChildProcess


def pg_bindir() -> Path:
    """Where initdb and postgres are; RuntimeError naming what to install if nowhere."""
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        d = Path(out.stdout.strip())
        if (d / "initdb").exists():
            return d
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                      else 0)
    if versions:
        return versions[-1].parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise RuntimeError("PostgreSQL's server is not installed: apt-get install postgresql")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer(ChildProcess):
    """One PostgreSQL server in a directory of its own (module doc)."""

    def __init__(self, base_dir: Path, *, user: str = "postgres") -> None:
        self.base_dir = Path(base_dir)
        self.data_dir = self.base_dir / "data"
        self.log_path = self.base_dir / "postgres.log"
        self.user = user
        self.host = "127.0.0.1"
        self.port = 0
        self.proc = None
        self._as_root = os.geteuid() == 0

    @classmethod
    def in_temp_dir(cls) -> PostgresServer:
        """A server in a new ``tempfile.mkdtemp()`` directory (pytest's ``tmp_path`` is
        mode 0700 under root's, which the ``postgres`` user cannot enter); not started."""
        return cls(Path(tempfile.mkdtemp(prefix="spool-pg-")))

    def _as(self) -> dict:
        return {"user": "postgres", "group": "postgres", "extra_groups": []} if self._as_root else {}

    def start(self, timeout: float = 60.0) -> PostgresServer:
        bindir = pg_bindir()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.base_dir, pw.pw_uid, pw.pw_gid)
        if not (self.data_dir / "PG_VERSION").exists():
            subprocess.run([str(bindir / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                            "-A", "trust", "-E", "UTF8", "--no-sync"],
                           check=True, capture_output=True, **self._as())
        self.port = self.port or _free_port()
        argv = [str(bindir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                "-h", self.host, "-k", str(self.base_dir),
                "-c", "wal_level=logical", "-c", "max_replication_slots=20",
                "-c", "max_wal_senders=20", "-c", "max_connections=200",
                "-c", "fsync=off", "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off", "-c", "shared_buffers=64MB"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child's stderr for its lifetime
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, **self._as())
        log.close()
        self.wait_ready("postgres", self._accepts, timeout)
        return self

    def _accepts(self) -> bool:
        try:
            with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            time.sleep(0.1)
            return False

    def dsn(self, db: str = "postgres") -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={db}"

    def url(self, db: str = "postgres") -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{db}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def stop(self, timeout: float = 30.0) -> int:
        """A fast shutdown (SIGINT: clients disconnected, a checkpoint); kill -9 after
        ``timeout``."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode
