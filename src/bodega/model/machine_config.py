"""The machine configuration: ``fly.MachineConfig``, field for field.

Unknown fields are kept and echoed back (``extra="allow"``), so a client that
sends something bodega does not act on gets its config back intact. Fields
are optional as in the API; responses omit what was never set.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from bodega.model.duration import parse_duration
from bodega.model.json import JsonObject
from bodega.model.limits import (
    MAX_ENV,
    MAX_FILE_BYTES,
    MAX_ITEMS,
    MAX_METADATA,
    MAX_SWAP_MB,
    check_config_size,
    check_mount_path,
    check_text_map,
)
from bodega.model.statics import Static
from bodega.model.stored import ReadsStored

CpuKind = Literal["shared", "performance"]
# What stands between a machine and the host's kernel (docs/isolation.md): namespaces and
# cgroups on the host's kernel; gVisor's kernel in user space (runsc); a kernel of its own.
Isolation = Literal["container", "sandbox", "vm"]
ISOLATIONS: tuple[Isolation, ...] = ("container", "sandbox", "vm")
SIGNALS = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGTERM",
           "SIGABRT", "SIGALRM", "SIGFPE", "SIGILL", "SIGPIPE", "SIGSEGV", "SIGTRAP")

# Presets as flyctl names them: shared-cpu-Nx is N x 256 MB, performance-Nx is N x 2048 MB.
_PRESET_KIND = {"shared-cpu": ("shared", 256), "performance": ("performance", 2048)}


class _Open(BaseModel):
    # Built on first use, not at import (as the answers: model/answer.py).
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


def names_registry(image: str) -> bool:
    """True when ``image`` starts with a registry host, so it is an OCI image to pull (and
    only a worker that runs images can run it); anything else is a label."""
    first, slash, _ = image.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def preset(size: str) -> tuple[CpuKind, int, int]:
    """(cpu_kind, cpus, memory_mb) for a preset such as ``shared-cpu-2x``."""
    for prefix, (kind, mem_per_cpu) in _PRESET_KIND.items():
        if size.startswith(prefix + "-") and size.endswith("x"):
            digits = size[len(prefix) + 1 : -1]
            if digits.isdigit() and int(digits) > 0:
                cpus = int(digits)
                return kind, cpus, cpus * mem_per_cpu  # type: ignore[return-value]
    raise ValueError(f"unknown machine size {size!r} (try shared-cpu-1x or performance-2x)")


class Guest(_Open):
    cpu_kind: CpuKind = "shared"
    cpus: int = Field(default=1, ge=1, le=64)
    memory_mb: int = Field(default=256, ge=128, le=1024 * 256)
    gpus: int | None = Field(default=None, ge=0, le=16)
    gpu_kind: str | None = None
    host_dedication_id: str | None = None
    kernel_args: list[str] | None = None
    # None: a container, today's default; kept unset so a config reads back as it was sent.
    isolation: Isolation | None = None

    @property
    def runs_in(self) -> Isolation:
        """The isolation the machine runs in: the one asked, else a container."""
        return self.isolation or "container"

    @field_validator("memory_mb")
    @classmethod
    def _multiple_of_128(cls, value: int) -> int:
        if value % 128:
            raise ValueError("memory_mb must be a multiple of 128")
        return value


class Init(_Open):
    exec: list[str] | None = None
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    tty: bool | None = None
    # A disk of swap for a vm's kernel; a container's or a process's cgroup may swap as
    # much beside its memory (docs/isolation.md). Bounded so a typo asks no host for more
    # disk than any offers.
    swap_size_mb: int | None = Field(default=None, ge=0, le=MAX_SWAP_MB)
    kernel_args: list[str] | None = None


class Process(_Open):
    name: str | None = None
    exec: list[str] | None = None
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: dict[str, str] | None = None
    user: str | None = None


class Restart(_Open):
    policy: Literal["no", "always", "on-failure", "spot-price"] | None = None
    max_retries: int | None = Field(default=None, ge=0, le=1000)


class StopConfig(_Open):
    signal: str | None = None
    timeout: str | int | None = None

    @field_validator("signal")
    @classmethod
    def _known_signal(cls, value: str | None) -> str | None:
        if value is not None and value not in SIGNALS:
            raise ValueError(f"unknown signal {value!r}")
        return value

    @field_validator("timeout")
    @classmethod
    def _duration(cls, value: str | int | None) -> str | int | None:
        parse_duration(value, 0.0)
        return value


class Concurrency(_Open):
    type: Literal["connections", "requests"] | None = None
    soft_limit: int | None = Field(default=None, ge=1)
    hard_limit: int | None = Field(default=None, ge=1)


class ProxyProtoOptions(_Open):
    version: Literal["v1", "v2"] | None = None


class TlsOptions(_Open):
    alpn: list[str] | None = None
    versions: list[str] | None = None
    default_self_signed: bool | None = None


class HttpOptions(_Open):
    h2_backend: bool | None = None


class Port(_Open):
    port: int | None = Field(default=None, ge=1, le=65535)
    start_port: int | None = Field(default=None, ge=1, le=65535)
    end_port: int | None = Field(default=None, ge=1, le=65535)
    handlers: list[str] | None = None
    force_https: bool | None = None
    proxy_proto_options: ProxyProtoOptions | None = None
    tls_options: TlsOptions | None = None
    http_options: HttpOptions | None = None


class CheckHeader(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=256)
    values: list[str] = Field(default_factory=list, max_length=16)


class Check(ReadsStored):
    """A health check, as Fly's MachineCheck and MachineServiceCheck define it (no other keys)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["tcp", "http"] | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    interval: str | int | None = None
    timeout: str | int | None = None
    grace_period: str | int | None = None
    method: str | None = Field(default=None, max_length=16)
    path: str | None = Field(default=None, max_length=1024)
    protocol: Literal["http", "https"] | None = None
    headers: list[CheckHeader] | None = Field(default=None, max_length=16)
    tls_skip_verify: bool | None = None
    tls_server_name: str | None = None
    kind: Literal["informational", "readiness"] | None = None


    @field_validator("interval", "timeout", "grace_period")
    @classmethod
    def _duration(cls, value: str | int | None) -> str | int | None:
        parse_duration(value, 0.0)
        return value


Autostop = Literal["off", "stop", "suspend"]


class Service(_Open):
    protocol: Literal["tcp", "udp"] = "tcp"
    internal_port: int = Field(ge=1, le=65535)
    ports: list[Port] | None = None
    autostart: bool | None = None
    autostop: Autostop | None = None
    min_machines_running: int | None = Field(default=None, ge=0)
    concurrency: Concurrency | None = None
    checks: list[Check] | None = None

    @field_validator("autostop", mode="before")
    @classmethod
    def _autostop_bool_or_string(cls, value: Any) -> Any:
        # Old clients send a bool; new ones a string. Both mean the same.
        if isinstance(value, bool):
            return "stop" if value else "off"
        return value

    @field_serializer("autostop")
    def _autostop_wire(self, value: Autostop | None) -> bool | str | None:
        # Responses keep the old bool for off/stop so old clients still parse them.
        if value is None or value == "suspend":
            return value
        return value == "stop"

    def has_http_handler(self) -> bool:
        return any("http" in (port.handlers or []) for port in self.ports or [])


class MachineMetrics(_Open):
    """Where the machine's program serves its own metrics (fly.toml's ``[metrics]``): the
    cluster's metrics store scrapes ``<private address>:<port><path>`` (docs/metrics.md)."""

    port: int = Field(ge=1, le=65535)
    path: str = Field(default="/metrics", min_length=1, max_length=512, pattern=r"^/")
    https: bool = False


class Mount(_Open):
    volume: str | None = None
    path: str
    name: str | None = None
    size_gb: int | None = None
    extend_threshold_percent: int | None = None
    add_size_gb: int | None = None
    size_gb_limit: int | None = None


class File(ReadsStored):
    """A file written into the machine before its program runs, at every start
    (``fly.File``): its bytes are ``raw_value`` (base64), or an app secret's value
    (``secret_name``: the secret holds the file base64-encoded, as on Fly), resolved by
    the worker at each start and never kept in the config. ``mode`` is chmod's (0644 when
    unset). An image machine's only: a host process has no root of its own to write in.
    ``image_config`` (the OCI config of an image as the file) is not acted on."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    guest_path: str
    raw_value: str | None = None
    secret_name: str | None = None
    image_config: str | None = None
    mode: int | None = Field(default=None, ge=0, le=0o7777)


    def check(self) -> None:
        """Raise ``ValueError`` saying what no worker could write (``check_limits``)."""
        check_mount_path(self.guest_path, "files guest_path")
        if (self.raw_value is None) == (self.secret_name is None):
            raise ValueError(f"file {self.guest_path}: give exactly one of raw_value and "
                             "secret_name")
        if self.image_config is not None:
            raise ValueError(f"file {self.guest_path}: image_config is not supported; give "
                             "raw_value or secret_name")
        if self.secret_name is not None and not self.secret_name.strip():
            raise ValueError(f"file {self.guest_path}: secret_name is empty")
        if self.raw_value is not None and len(self.content()) > MAX_FILE_BYTES:
            raise ValueError(f"file {self.guest_path}: at most {MAX_FILE_BYTES} bytes, not "
                             f"{len(self.content())}")

    def content(self) -> bytes:
        """``raw_value`` decoded; ``ValueError`` if it is not base64."""
        return decode_base64(self.raw_value or "", f"file {self.guest_path}: raw_value")


def decode_base64(text: str, what: str) -> bytes:
    """Standard base64, padded, as Fly's API carries a file (whitespace ignored)."""
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} is not base64") from None


class MachineConfig(_Open):
    image: str = Field(min_length=1, max_length=512)
    env: dict[str, str] | None = None
    metadata: dict[str, str] | None = None
    guest: Guest | None = None
    size: str | None = None
    init: Init | None = None
    processes: list[Process] | None = None
    services: list[Service] | None = None
    checks: dict[str, Check] | None = None
    restart: Restart | None = None
    auto_destroy: bool | None = None
    mounts: list[Mount] | None = Field(default=None, max_length=1)
    stop_config: StopConfig | None = None
    standbys: list[str] | None = None
    schedule: str | None = None
    files: list[File] | None = None
    statics: list[Static] | None = Field(default=None, max_length=MAX_ITEMS)
    metrics: MachineMetrics | None = None

    @model_validator(mode="after")
    def _size_fills_guest(self) -> MachineConfig:
        if self.guest is None and self.size:
            kind, cpus, memory = preset(self.size)
            self.guest = Guest(cpu_kind=kind, cpus=cpus, memory_mb=memory)
        if self.env and len(self.env) > MAX_ENV:
            raise ValueError(f"at most {MAX_ENV} environment variables")
        isolation = self.effective_guest().runs_in
        if isolation != "container" and not names_registry(self.image):
            # Its own kernel runs an image's root filesystem: a host process has none.
            raise ValueError(f"guest.isolation {isolation} runs an image (a reference with a "
                             f"registry host), not the host process {self.image!r}")
        return self

    def check_limits(self) -> None:
        """Raise ``ValueError`` if a client's config is over a limit (``limits.py``).

        Checked where a config comes in, not on every load: a record stored
        before a limit was tightened still reads back.
        """
        check_text_map("env", self.env or {}, MAX_ENV, env=True)
        check_text_map("metadata", self.metadata or {}, MAX_METADATA)
        for process in self.processes or []:
            check_text_map("processes env", process.env or {}, MAX_ENV, env=True)
        for name in ("services", "processes", "checks", "files"):
            items = getattr(self, name, None)
            if isinstance(items, list | dict) and len(items) > MAX_ITEMS:
                raise ValueError(f"at most {MAX_ITEMS} {name}, not {len(items)}")
        for mount in self.mounts or []:
            check_mount_path(mount.path)
        paths = [file.guest_path for file in self.files or []]
        for file in self.files or []:
            file.check()
            if paths.count(file.guest_path) > 1:
                raise ValueError(f"files: {file.guest_path} is given more than once")
        if self.files and not names_registry(self.image):
            raise ValueError(f"files need an image machine: {self.image!r} runs as a host "
                             "process, with no root of its own to write them in")
        check_config_size(self.to_wire())

    def effective_guest(self) -> Guest:
        return self.guest or Guest()

    def command(self) -> list[str] | None:
        """The argv to run: init.exec, else entrypoint + cmd, else processes[0]."""
        if self.init and self.init.exec:
            return list(self.init.exec)
        if self.init and (self.init.entrypoint or self.init.cmd):
            return [*(self.init.entrypoint or []), *(self.init.cmd or [])]
        if self.processes:
            first = self.processes[0]
            if first.exec:
                return list(first.exec)
            if first.entrypoint or first.cmd:
                return [*(first.entrypoint or []), *(first.cmd or [])]
        return None

    def restart_policy(self) -> tuple[str, int]:
        """(policy, max_retries) with the API's defaults: on-failure, 10 retries."""
        policy = (self.restart.policy if self.restart else None) or "on-failure"
        retries = 10
        if self.restart and self.restart.max_retries is not None:
            retries = self.restart.max_retries
        return policy, retries

    def to_wire(self) -> JsonObject:  # the config as JSON, about to be written
        return self.model_dump(mode="json", exclude_none=True)
