"""Request bodies of the Fly Machines API v1 subset bodega serves, field for field.

Unknown fields are ignored (``extra="ignore"``) the way the real API ignores
fields it does not act on; types follow the published spec. Clients send the
same models (``MachinesClient``); the answers are ``model/``'s and ``wire``'s
answer models (``model/answer.py``).
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bodega.model.errors import BadRequest, validation_message
from bodega.model.ids import MachineName
from bodega.model.limits import MAX_METADATA, check_text_map
from bodega.model.machine_config import Guest, MachineConfig

# Volumes are whole gigabytes; past this a size is a typo, not a disk.
MAX_VOLUME_GB = 16 * 1024
M = TypeVar("M", bound=BaseModel)


class _Body(BaseModel):
    # Built on first use, not at import: a client sends one or two of these bodies.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, defer_build=True)


class CreateAppRequest(_Body):
    app_name: str | None = None
    name: str | None = None
    org_slug: str | None = None  # required: the Machines API answers 400 without it
    network: str | None = None
    enable_subdomains: bool | None = None

    def chosen_name(self) -> str | None:
        return self.app_name or self.name


class AssignIpRequest(_Body):
    type: str | None = None  # v4, v6, private_v6 or shared_v4
    region: str | None = None
    service_name: str | None = None
    network: str | None = None
    org_slug: str | None = None


class AppSecretsUpdateRequest(_Body):
    values: dict[str, str | None] = Field(default_factory=dict)  # None unsets a secret


class SetAppSecretRequest(_Body):
    value: str


class CreateAppDeployTokenRequest(_Body):
    expiry: str | None = None


class CreateMachineRequest(_Body):
    config: MachineConfig
    name: MachineName | None = None
    region: str | None = None
    skip_launch: bool = False
    skip_service_registration: bool = False
    lease_ttl: int | None = Field(default=None, ge=1, le=3600)
    lsvd: bool | None = None
    skip_secrets: bool | None = None
    min_secrets_version: int | None = None

    @field_validator("config")
    @classmethod
    def _within_limits(cls, config: MachineConfig) -> MachineConfig:
        config.check_limits()
        return config


class UpdateMachineRequest(CreateMachineRequest):
    current_version: str | None = None


class StopRequest(_Body):
    signal: str | int | None = None
    timeout: str | int | None = None


class SignalRequest(_Body):
    signal: str | int | None = None


class ExecRequest(_Body):
    command: list[str] | None = None
    cmd: str | None = None
    timeout: int = Field(default=30, ge=1, le=600)
    stdin: str | None = None
    container: str | None = None


class CreateLeaseRequest(_Body):
    ttl: int | None = Field(default=None, ge=1, le=3600)
    description: str = ""


class UpdateMetadataRequest(_Body):
    metadata: dict[str, str | None] = Field(default_factory=dict)
    machine_version: str | None = None
    updated_at: str | None = None

    @field_validator("metadata")
    @classmethod
    def _sound(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        check_text_map("metadata", value, MAX_METADATA)
        return value


class UpsertMetadataKeyRequest(_Body):
    value: str
    updated_at: str | None = None

    @field_validator("value")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("a metadata value cannot hold a NUL character")
        return value


class CreateVolumeRequest(_Body):
    name: str
    region: str | None = None
    size_gb: int = Field(default=1, ge=1, le=MAX_VOLUME_GB)
    encrypted: bool = True
    fstype: str = "ext4"
    require_unique_zone: bool = True
    snapshot_retention: int = 5
    auto_backup_enabled: bool = True
    compute: Guest | None = None
    snapshot_id: str | None = None
    source_volume_id: str | None = None


class UpdateVolumeRequest(_Body):
    snapshot_retention: int | None = None
    auto_backup_enabled: bool | None = None


class SetMemoryLimitRequest(_Body):
    limit_mb: int | None = None


class ReclaimMemoryRequest(_Body):
    amount_mb: int | None = None  # None or 0: all the kernel can


class ExtendVolumeRequest(_Body):
    size_gb: int = Field(ge=1, le=MAX_VOLUME_GB)


class PlacementsRequest(_Body):
    org_slug: str = "personal"
    compute: Guest | None = None
    region: str | None = None
    count: int = Field(default=0, ge=0, le=1000)
    volume_name: str | None = None
    volume_size_bytes: int | None = None
    weights: dict[str, int] | None = None
    # bodega's addition: the app whose placement to simulate (co-location penalties apply).
    app: str | None = None
    image: str | None = None
    explain: bool = False

    @field_validator("region")
    @classmethod
    def _strip(cls, value: str | None) -> str | None:
        return value.strip() if value else value


def checked(model: type[M], data: object, where: str = "") -> M:
    """``data`` read into ``model`` by a client before it sends it, checked as the broker
    would check it: a bad body is the ``BadRequest`` the broker would have answered, whose
    message names the field (under ``where``), with no round trip."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(validation_message(exc, where)) from None
