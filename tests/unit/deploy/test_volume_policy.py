"""A fly.toml mount's ``snapshot_retention`` and ``scheduled_snapshots`` act: read without a
warning, and given to a volume the deploy creates for the mount (docs/volumes.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from bodega.deploy.core.config_check import check
from bodega.deploy.execute import Executor, VolumePolicy
from bodega.model.machine_config import MachineConfig, Mount
from bodega.model.volume import Volume
from bodega.wire.public.fly import CreateVolumeRequest
from bodega.wire.public.machines_client import MachinesClient

FLY_TOML = """app = "kept"
primary_region = "ams"

[[mounts]]
  source = "data"
  destination = "/data"
  snapshot_retention = 3
  scheduled_snapshots = false
"""


class Recorder:
    def __init__(self) -> None:
        self.made: list[CreateVolumeRequest] = []

    async def volumes(self, app: str, **_: Any) -> list[Volume]:
        return []

    async def create_volume(self, app: str, body: CreateVolumeRequest) -> Volume:
        self.made.append(body)
        return Volume(id="vol_1", name=body.name, region=body.region or "ams",
                      size_gb=body.size_gb, state="created")


def test_the_keys_are_read_without_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "fly.toml"
    path.write_text(FLY_TOML)
    result = check(path, app=None, image="registry.example/app:1")
    assert result.ok, result.errors
    assert not [w for w in result.warnings if "snapshot" in w.key], result.warnings
    assert result.config is not None
    (mount,) = result.config.mounts
    assert (mount.snapshot_retention, mount.scheduled_snapshots) == (3, False)


def test_a_volume_the_deploy_creates_gets_the_mounts_policy() -> None:
    client = Recorder()
    executor = Executor(cast(MachinesClient, client), "kept",
                        volume_policies={"data": VolumePolicy(3, False)})
    config = MachineConfig(image="registry.example/app:1",
                           mounts=[Mount(volume="data", path="/data", name="data")])
    given = asyncio.run(executor._with_volume(config, "ams"))
    (made,) = client.made
    assert (made.name, made.snapshot_retention, made.auto_backup_enabled) == ("data", 3, False)
    assert given.mounts is not None
    assert given.mounts[0].volume == "vol_1"


def test_a_mount_with_no_policy_leaves_the_apis_defaults() -> None:
    client = Recorder()
    executor = Executor(cast(MachinesClient, client), "kept")
    config = MachineConfig(image="registry.example/app:1",
                           mounts=[Mount(volume="data", path="/data", name="data")])
    asyncio.run(executor._with_volume(config, "ams"))
    (made,) = client.made
    assert (made.snapshot_retention, made.auto_backup_enabled) == (5, True)
