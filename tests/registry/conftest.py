"""Registry fixtures: real ``spool registry`` processes over the real broker.

- ``registry``: one registry process for the session, against the session ``broker``.
  Tests share its ``_schemas``: each uses its own subjects (``subject``), and none
  changes the global config or mode (use ``own_registry`` for that). Another registry
  started on the session broker must use a ``--group-id`` of its own: joining or leaving
  this one's group elects a primary again, and the new primary writes a NOOP record.
- ``own_registry``: a broker and a registry of the module's own, for tests that change
  global state (the global compatibility level, the global mode, IMPORT).
- ``subject``: a subject name no other test uses.
- ``sr``: ``call`` bound to the session registry's URL: ``sr("GET", "/subjects")``.

Before a registry is handed out it has written once (a subject-level config set then
removed), so whatever it writes on becoming the primary is behind it and a test that
compares ``_schemas``' end offset before and after a request sees that request only.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from types import ModuleType

import pytest

from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.registry_proc import Answer, RegistryProcess, call


def _warmed(reg: RegistryProcess) -> RegistryProcess:
    warm = f"warm-up-{uuid.uuid4().hex[:8]}"
    for method, body in (("PUT", {"compatibility": "NONE"}), ("DELETE", None)):
        a = call(reg.url, method, f"/config/{warm}", body)
        assert a.status == 200, (a.status, a.body, reg.log_tail())
    return reg


@pytest.fixture(scope="session")
def registry(broker, tmp_path_factory) -> Iterator[RegistryProcess]:
    reg = RegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry") / "registry.log")
    reg.start()
    try:
        yield _warmed(reg)
    finally:
        reg.stop()


@pytest.fixture(scope="module")
def own_registry(tmp_path_factory) -> Iterator[RegistryProcess]:
    base = tmp_path_factory.mktemp("own-registry")
    b = BrokerProcess(base / "data")
    b.start()
    reg = RegistryProcess(b.bootstrap, base / "registry.log")
    try:
        reg.start()
        yield _warmed(reg)
    finally:
        reg.stop()
        b.stop()


@pytest.fixture
def subject(request) -> str:
    name = request.node.name[:40].replace("[", "-").replace("]", "")
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def sr(registry) -> Callable[..., Answer]:
    return partial(call, registry.url)


@pytest.fixture
def protoc(tmp_path) -> Iterator[Callable[[dict[str, str], str], ModuleType]]:
    """``compile({file name: .proto text}, module)``: the files written to tmp_path,
    compiled by protoc to Python and ``module`` (e.g. ``order_pb2``) imported; tmp_path
    is on sys.path until the test ends. Give the files names and packages unique to the
    test: protobuf's default descriptor pool is global."""
    from grpc_tools import protoc as grpc_protoc

    def compile_(files: dict[str, str], module: str) -> ModuleType:
        for name, text in files.items():
            (tmp_path / name).write_text(text)
        assert grpc_protoc.main(["protoc", f"-I{tmp_path}", f"--python_out={tmp_path}",
                                 *files]) == 0
        if str(tmp_path) not in sys.path:
            sys.path.insert(0, str(tmp_path))
        return importlib.import_module(module)

    try:
        yield compile_
    finally:
        if str(tmp_path) in sys.path:
            sys.path.remove(str(tmp_path))
