"""One evaluator per app across brokers: the lease passes when its holder goes quiet.

Two namespace hosts, each with its broker: host 1 runs ``bodega up --advertise``,
host 2 joins. An app autoscaled on a constant expression is evaluated by one broker
(the run row's holder, what ``bodega autoscale show`` names). That broker frozen
(SIGSTOP: alive to its supervisor, silent to the cluster), the other takes the lease
within its ttl and decides on; thawed, the first stands down. The new holder killed
with SIGKILL, its supervisor starts it again and the evaluation goes on under the
lease, by one of the two.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.deploy_kit import readable_dir
from tests.cluster.multihost_kit import MultiHost, three_hosts, until, wait_for
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

APP = "held"
TTL = 10.0  # the evaluator's (broker/autoscale/evaluator.py)
EVERY = 2.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[MultiHost]:
    with readable_dir() as root, three_hosts(root, count=2) as multi:
        host = multi.start(2, *multi.join_argv("syd"), "--cpus", "2", "--memory-mb", "1024",
                           "--driver", "process")
        wait_for(host, "bodega joined")
        until(lambda: sum(1 for s in multi.alive().values() if s == "alive") >= 6,
              "two workers, two brokers and two proxies alive")
        yield multi


def shown(cluster: MultiHost, through: str | None) -> dict[str, Any] | None:
    """``bodega autoscale show --json``, through the broker named ``through`` (None: host
    1's): a frozen broker answers nothing."""
    env = {"BODEGA_API_URL": broker(cluster, through)["url"]} if through else {}
    done = subprocess.run([sys.executable, "-m", "bodega", "autoscale", "show", "-a", APP,
                           "--json"], env={**cluster.env, **env}, capture_output=True,
                          text=True, timeout=30, check=False)
    return dict(json.loads(done.stdout)) if done.returncode == 0 else None


def decided_after(cluster: MultiHost, at: float, by: str | None = None,
                  through: str | None = None) -> dict[str, Any] | None:
    found = shown(cluster, through)
    if found is None or not found.get("decision") or found["decision"]["at"] <= at:
        return None
    return found if by is None or found["evaluator"] == by else None


def broker(cluster: MultiHost, name: str) -> dict[str, Any]:
    for member in cluster.members:
        for c in member.components():
            if c["role"] == "broker" and c["name"] == name and c.get("pid"):
                return dict(c)
    raise AssertionError(f"no broker named {name}")


def broker_pid(cluster: MultiHost, name: str) -> int:
    return int(broker(cluster, name)["pid"])


def test_a_quiet_evaluator_is_taken_over_within_the_ttl_and_a_killed_one_resumes(
        cluster: MultiHost) -> None:
    cluster.ok("apps", "create", APP)
    cluster.ok("machine", "run", "-a", APP, "--", machine_python(), "-c",
               "import time; time.sleep(3600)")
    cluster.ok("autoscale", "set", "-a", APP, "--min", "1", "--max", "2",
               "--expr", "vector(1)")
    first = until(lambda: decided_after(cluster, 0.0), "a first decision")
    holder = first["evaluator"]
    brokers = {c["name"] for m in cluster.members for c in m.components()
               if c["role"] == "broker"}
    assert holder in brokers
    assert len(brokers) == 2
    (other,) = brokers - {holder}

    pid = broker_pid(cluster, holder)
    frozen_at = time.time()
    os.kill(pid, signal.SIGSTOP)
    try:
        taken = until(lambda: decided_after(cluster, frozen_at, by=other, through=other),
                      f"{other} evaluating once {holder} is quiet")
        took = taken["decision"]["at"] - frozen_at
        # Quiet for the ttl after the last beat it saw, then one evaluation to take, one
        # to act: never before the ttl, and well within two.
        assert TTL - EVERY <= took <= 2 * TTL + 2 * EVERY, took
    finally:
        os.kill(pid, signal.SIGCONT)
    thawed_at = time.time()
    time.sleep(3 * EVERY)
    kept = decided_after(cluster, thawed_at)
    assert kept is not None
    assert kept["evaluator"] == other  # the first stood down
    print(f"\n{other} took over {took:.1f} s after {holder} went quiet")

    killed_at = time.time()
    os.kill(broker_pid(cluster, other), signal.SIGKILL)
    resumed = until(lambda: decided_after(cluster, killed_at + 1, through=holder),
                    "decisions after the kill")
    assert resumed["evaluator"] in brokers
    with contextlib.suppress(Exception):
        cluster.ok("autoscale", "off", "-a", APP)
