"""Spool installed from its wheel, away from the repository, works as a user gets it.

One test, one fresh venv per run (the registries through pip, its cache when warm):
the wheel is built from a copy of the project's tracked files, so nothing outside
them (a stray build/, __pycache__) can make it pass; every file under spool/ that
is not Python is in it (whatever the package reads at run time); it installs with
its dependencies (and pytest, for the sample project) into a new venv; from there,
in a directory outside the repository and without PYTHONPATH, ``spool --version``
prints the project's version, ``import spool`` comes from the venv (which has no
pyspark: the Spark extra stays optional), ``spool broker``
serves a produce/consume round trip, and examples/testing's tests pass with the
plugin loaded through its ``pytest11`` entry point.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version as installed_version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ROUND_TRIP = """
import sys
from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap = sys.argv[1]
p = Producer({"bootstrap.servers": bootstrap})
for i in range(10):
    p.produce("wheel-test", key=b"k%d" % i, value=b"v%d" % i)
assert p.flush(30) == 0
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wheel-test"})
c.assign([TopicPartition("wheel-test", 0, 0)])
got = []
while len(got) < 10:
    m = c.poll(30)
    assert m is not None and m.error() is None, m and m.error()
    got.append(m.value().decode())
c.close()
print(" ".join(got))
"""


def _tracked_files() -> list[str]:
    """The project's files as a clean checkout has them (git's list; a walk without git)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout
        return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and ".git" not in p.parts]


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_wheel_installs_and_serves_in_a_fresh_venv(tmp_path: Path) -> None:
    files = _tracked_files()
    src = tmp_path / "src"
    for f in files:
        if f.startswith(("spool/", "examples/testing/")) or f in (
                "pyproject.toml", "README.md", "pyspark_spool.py"):
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
          str(src)], env=env, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("spool-*.whl")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert wheel.name.startswith(f"spool-{project['version']}-")

    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_text = z.read(entry_points).decode()
    data_files = {f for f in files if f.startswith("spool/") and not f.endswith(".py")}
    assert data_files - names == set(), "files under spool/ missing from the wheel"
    assert {f for f in files if f.startswith("spool/") and f.endswith(".py")} <= names
    assert re.search(r"\[console_scripts\]\s+spool = spool\.cli\.main:app", entry_text)
    assert re.search(r"\[pytest11\]\s+spool = spool\.testing\.pytest_plugin", entry_text)

    venv = tmp_path / "venv"
    # pip is this environment's (``pip --python``): ensurepip would cost as much as the install
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=env, timeout=120)
    py, spool = venv / "bin" / "python", venv / "bin" / "spool"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-compile",
          str(wheel), f"pytest=={installed_version('pytest')}"], env=env, timeout=900)

    work = tmp_path / "elsewhere"
    work.mkdir()
    assert _run([str(spool), "--version"], cwd=work, env=env, timeout=60).stdout.strip() == \
        project["version"]
    where = _run([str(py), "-c", "import importlib.util, spool; print(spool.__file__, "
                  "importlib.util.find_spec('pyspark'))"], cwd=work, env=env,
                 timeout=60).stdout.split()
    assert Path(where[0]).is_relative_to(venv) and where[1] == "None", where  # spark: an extra

    broker = subprocess.Popen(
        [str(spool), "broker", "--log-level", "WARNING", "--strict-config",
         "--override", f"log.dirs={work / 'data'}",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()
        m = re.search(r"listening on (127\.0\.0\.1:\d+)", line)
        assert m, f"{line!r} {broker.stderr.read() if broker.poll() is not None else ''}"
        got = _run([str(py), "-c", ROUND_TRIP, m.group(1)], cwd=work, env=env, timeout=120)
        assert got.stdout.split() == [f"v{i}" for i in range(10)]
    finally:
        broker.send_signal(signal.SIGTERM)
        try:
            assert broker.wait(30) == 0
        finally:
            if broker.poll() is None:
                broker.kill()

    sample = src / "examples" / "testing"
    out = _run([str(py), "-m", "pytest", "-p", "no:cacheprovider"], cwd=sample, env=env,
               timeout=300).stdout
    assert re.search(r"\b2 passed\b", out), out
