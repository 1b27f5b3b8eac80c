"""`bodega up` is not up until a create can work: the broker ready and every worker seen.

A real broker and worker (separate processes) whose gossip never meets: the
broker answers, but never sees the worker, so the cluster is reported not
ready, with the log to read, instead of up.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from bodega.cli.daemons.up import _run
from bodega.cluster.cluster_keys import ensure_ca
from bodega.cluster.components import Component, components_for
from bodega.cluster.config import ClusterConfig
from bodega.cluster.ports import free_udp_ports
from bodega.cluster.supervisor import LocalCluster
from bodega.registry.sealing import keyfile
from tests.cluster.up_kit import free_port


def cluster_config(data_dir: Path) -> ClusterConfig:
    # No registry agent: the broker keeps a replica of its own, so a broker that joins through
    # a dead port truly never meets the worker. With an agent, the broker's own row reaches
    # the host's view, where the worker's side can find the broker and gossip with it after all.
    names = ["ams-1", "broker", "proxy"]  # every component that gossips
    keyfile.ensure(data_dir / "gossip-keyring")  # what `bodega up` makes before `_run`
    return ClusterConfig(registry_agent=False,
        data_dir=data_dir, token="readiness-token", regions=("ams",),
        workers_per_region=1, worker_cpus=1, worker_memory_mb=512, api_port=free_port(),
        proxy_port=free_port(), driver="null", log_level="warning",
        gossip_ports=dict(zip(names, free_udp_ports("127.0.0.1", len(names)), strict=True)))


def local_cluster(config: ClusterConfig, components: list[Component]) -> LocalCluster:
    """The cluster as `bodega up` runs it: with its CA, to give each component its identity."""
    return LocalCluster(config, components,
                        ensure_ca(config.data_dir, config.trust_domain, config.cert_lifetime))


async def test_a_broker_that_never_sees_its_worker_is_not_called_up(tmp_path: Path) -> None:
    config = cluster_config(tmp_path)
    components = [c for c in components_for(config) if c.role != "proxy"]
    broker = next(c for c in components if c.role == "broker")
    worker = next(c for c in components if c.role == "worker")
    # The broker joins through a port nobody gossips on, so it never hears of the worker.
    (dead,) = free_udp_ports("127.0.0.1", 1)
    broker.argv[broker.argv.index("--join") + 1] = f"127.0.0.1:{dead}"
    cluster = local_cluster(config, components)
    try:
        await cluster.start()
        verdict = await cluster.until_ready(timeout=5)
        assert verdict is not None
        # Before the broker reports readiness itself it says 200 and lists no worker; after,
        # it answers 503: either way the line says what is missing and where to look.
        assert verdict.log_file in (worker.log_file, broker.log_file)
        assert verdict.log_file.exists()
        if verdict.log_file == worker.log_file:
            assert verdict.what == "the broker sees 0 of 1 workers alive; not yet ams-1"
        else:
            assert verdict.what.startswith("the broker is not ready")
    finally:
        await cluster.stop()


async def test_a_whole_cluster_is_ready(tmp_path: Path) -> None:
    config = cluster_config(tmp_path)
    cluster = local_cluster(config, components_for(config))
    try:
        await cluster.start()
        assert await cluster.until_ready(timeout=120) is None
    finally:
        await cluster.stop()


async def test_up_says_what_is_not_ready_and_never_that_it_is_up(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = cluster_config(tmp_path)
    components = components_for(config)
    broker = next(c for c in components if c.role == "broker")
    (dead,) = free_udp_ports("127.0.0.1", 1)
    broker.argv[broker.argv.index("--join") + 1] = f"127.0.0.1:{dead}"
    running = asyncio.create_task(
        _run(config, False, cluster=local_cluster(config, components), ready_timeout=2))
    said: list[str] = []
    try:
        for _ in range(600):  # bounded: the components start, then two rounds of waiting
            out, err = capsys.readouterr()
            said += (out + err).splitlines()
            if sum(line.startswith("not up yet: ") for line in said) >= 2:
                break
            assert not running.done(), said
            await asyncio.sleep(0.1)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    waiting = [line for line in said if line.startswith("not up yet: ")]
    assert len(waiting) >= 2, said
    assert waiting[0].endswith("; still waiting (Ctrl-C stops)")
    assert "(log: " + str(tmp_path / "logs") in waiting[0]
    assert not [line for line in said if "bodega is up" in line]
    assert not [c for c in components if c.process is not None]  # all stopped
