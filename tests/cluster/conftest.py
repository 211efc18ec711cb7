"""Fixtures of the cluster tier: ``cluster_factory`` makes ``Cluster``s of real processes in
the test's tmp dir, stops them all at the end, and prints every node's log tail when the test
failed."""

from __future__ import annotations

import pytest

from tests.helpers.cluster_proc import Cluster


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


@pytest.fixture
def cluster_factory(tmp_path, request):
    made: list[Cluster] = []

    def make(**kwargs) -> Cluster:
        c = Cluster(tmp_path / f"cluster{len(made)}", **kwargs)
        made.append(c)
        return c

    yield make
    failed = any(getattr(request.node, f"rep_{w}", None) is not None
                 and getattr(request.node, f"rep_{w}").failed for w in ("setup", "call"))
    for c in made:
        c.stop()
        if failed:
            print(f"\n===== logs of {c.base_dir} =====\n{c.logs()}")
