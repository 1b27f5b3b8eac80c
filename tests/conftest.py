"""Settings every test shares.

Hypothesis runs with no per-example deadline: tests assert behaviour, never wall-clock
time, and a property must not fail because a busy host ran one example slowly.

Every `bodega up` keeps its cluster as a CLI context, and the CLI reads the current
one: each test gets a contexts file of its own (``BODEGA_CONFIG``, inherited by the
processes it starts), never the user's ``~/.config/bodega/config.toml``. Clusters a
module shares start before any one test's file is set: they write to one file per test
process (``session_contexts``), which is set first.

On a hybrid cgroup host, the first worker that runs crun gives the v2 hierarchy's
controllers v1 hierarchies of their own (``docs/images.md``), a change to the host that
outlives it. The session makes that change before any test, as that worker would, so
tests that compare the host's mounts before and after a cluster never see it happen.
"""

import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from bodega.runtime.lifecycle import heed_stop_signals
from bodega.worker.host.image_drivers import controllers_for

# Tests assert behaviour, never wall-clock times: no deadline, and no failure because
# generating examples was slow on a loaded host (the ``too_slow`` health check).
settings.register_profile("bodega", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("bodega")


def pytest_sessionstart(session: pytest.Session) -> None:
    heed_stop_signals()  # a suite started in the background still stops what it starts
    if os.geteuid() == 0 and shutil.which("crun") is not None:
        controllers_for("crun")


@pytest.fixture(scope="session", autouse=True)
def session_contexts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.getbasetemp() / "contexts" / "session" / "config.toml"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BODEGA_CONFIG", str(path))
        yield path


@pytest.fixture(autouse=True)
def contexts_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  monkeypatch: pytest.MonkeyPatch) -> Path:
    name = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]
    path = tmp_path_factory.getbasetemp() / "contexts" / name / "config.toml"
    monkeypatch.setenv("BODEGA_CONFIG", str(path))
    return path
