"""Request bodies of a worker's internal API (brokers and proxies call it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bodega.model.config import MachineConfig


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ReserveBody(_Body):
    app: str = Field(min_length=1, max_length=63)
    cpu_kind: str = "shared"
    cpus: int = Field(default=1, ge=0, le=64)
    memory_mb: int = Field(default=256, ge=0)
    disk_gb: int = Field(default=0, ge=0)
    gpus: int = Field(default=0, ge=0)
    gpu_kind: str | None = None
    ttl: float | None = Field(default=None, gt=0, le=300)  # None: the worker's default


class CreateMachineBody(_Body):
    app: str = Field(min_length=1, max_length=63)
    config: MachineConfig
    name: str | None = None
    generated_name: bool = False  # the caller made the name up: pick another if it is taken
    machine_id: str | None = None
    reservation_id: str | None = None
    skip_launch: bool = False
    skip_service_registration: bool = False
    lease_ttl: int | None = Field(default=None, ge=1, le=3600)
    idempotency_key: str | None = Field(default=None, max_length=128)
    placement: dict[str, Any] | None = None


class UpdateMachineBody(_Body):
    config: MachineConfig
    current_version: str | None = None
    skip_launch: bool = False
    name: str | None = None
    region: str | None = None


class StopBody(_Body):
    signal: str | int | None = None
    timeout: str | int | float | None = None


class SignalBody(_Body):
    signal: str | int | None = None


class ExecBody(_Body):
    command: list[str] | None = None
    cmd: str | None = None
    timeout: int = Field(default=30, ge=1, le=600)
    stdin: str | None = None
    container: str | None = None


class LeaseBody(_Body):
    ttl: int | None = Field(default=None, ge=1, le=3600)
    description: str = Field(default="", max_length=256)


class MetadataBody(_Body):
    metadata: dict[str, str | None] = Field(default_factory=dict)
    machine_version: str | None = None


class MetadataValueBody(_Body):
    value: str


class CreateVolumeBody(_Body):
    app: str = Field(min_length=1, max_length=63)
    name: str
    size_gb: int = 1
    encrypted: bool = True
    fstype: str = "ext4"
    snapshot_retention: int = 5
    auto_backup_enabled: bool = True
    require_unique_zone: bool = True


class UpdateVolumeBody(_Body):
    snapshot_retention: int | None = None
    auto_backup_enabled: bool | None = None


class ExtendVolumeBody(_Body):
    size_gb: int
