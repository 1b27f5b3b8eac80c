"""``bodega.toml``: the fly.toml subset a small app uses, read with tomllib, checked by pydantic.

Keys flyctl knows but bodega does not act on (``kill_signal``, ``[build] builder``,
``[metrics]``...) are dropped with a warning, so the fly.toml ``fly launch`` writes
loads unchanged; anything else unknown is an error naming the file, the line and the
field; an unknown key is reported before anything it leaves missing, with the known
key it is closest to ("did you mean ..."). ``[processes]`` maps a process group to
its command, split as a shell splits words (``shlex``) but never run through one.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bodega.deploy.machine_keys import DEFAULT_GROUP as DEFAULT_GROUP
from bodega.deploy.toml_errors import describe, line_of
from bodega.model.duration import parse_duration
from bodega.model.machine_config import Check, Guest, Isolation, preset

PROCESS_IMAGE = "process"  # the image recorded for machines the process driver runs

# flyctl keys bodega accepts and ignores (each one warned about), by section.
IGNORED: dict[str, frozenset[str]] = {
    "": frozenset({"kill_signal", "kill_timeout", "swap_size_mb", "console_command",
                   "experimental", "metrics", "statics", "files", "restart", "hostname",
                   "build_target"}),
    "build": frozenset({"builder", "builtin", "buildpacks", "ignorefile",
                        "args", "build-target", "settings"}),
    "http_service": frozenset({"http_options", "tls_options", "processes"}),
    "deploy": frozenset({"strategy_options", "wait_timeout_seconds"}),
}


class ConfigError(ValueError):
    """A bodega.toml that cannot be used: says file, line and field."""


def _duration(value: str | None) -> str | None:
    """A Go duration as fly.toml writes them (``60s``, ``1m30s``, ``500ms``)."""
    if value is not None:
        try:
            parse_duration(value, 0.0)
        except ValueError:
            raise ValueError(f"not a duration {value!r} (use e.g. 60s, 1m30s)") from None
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Build(_Strict):
    image: str | None = None
    dockerfile: str | None = None  # built with buildah and pushed by `bodega deploy`


class TomlCheck(_Strict):
    type: Literal["tcp", "http"] = "tcp"
    port: int | None = Field(default=None, ge=1, le=65535)
    path: str | None = None
    method: str | None = None
    protocol: str | None = None
    headers: dict[str, str] | None = None
    tls_skip_verify: bool | None = None
    tls_server_name: str | None = None
    kind: Literal["informational", "readiness"] | None = None
    interval: str | None = None
    timeout: str | None = None
    grace_period: str | None = None
    processes: list[str] | None = None

    _durations = field_validator("interval", "timeout", "grace_period")(_duration)

    def check(self, port: int | None = None) -> Check:
        """The check as the Machines API takes it; ``port``: the service's, when the check
        names none."""
        fields = self.model_dump(exclude_none=True, exclude={"processes", "headers"})
        if self.headers:  # fly.toml writes a map; the Machines API takes [{name, values}]
            fields["headers"] = [{"name": k, "values": [v]} for k, v in self.headers.items()]
        if self.port is None and port is not None:
            fields["port"] = port
        return Check.model_validate(fields)


class Concurrency(_Strict):
    type: Literal["connections", "requests"] = "connections"
    soft_limit: int | None = Field(default=None, ge=1)
    hard_limit: int | None = Field(default=None, ge=1)


class HttpService(_Strict):
    internal_port: int = Field(ge=1, le=65535)
    force_https: bool = False
    auto_stop_machines: bool | Literal["off", "stop", "suspend"] = "off"
    auto_start_machines: bool = True
    min_machines_running: int = Field(default=0, ge=0)
    concurrency: Concurrency | None = None
    checks: list[TomlCheck] = []


Handler = Literal["http", "tls", "proxy_proto"]  # none at all: raw TCP passed through


class ProxyProtoOptions(_Strict):
    version: Literal["v1", "v2"] = "v1"


class TlsOptions(_Strict):
    alpn: list[str] | None = None
    versions: list[Literal["TLSv1.2", "TLSv1.3"]] | None = None
    default_self_signed: bool | None = None


class HttpOptions(_Strict):
    h2_backend: bool | None = None  # gRPC: HTTP/2 to the machine


class ServicePort(_Strict):
    """One public port (or a range, ``start_port``..``end_port``) and how the edge handles it."""

    port: int | None = Field(default=None, ge=1, le=65535)
    start_port: int | None = Field(default=None, ge=1, le=65535)
    end_port: int | None = Field(default=None, ge=1, le=65535)
    handlers: list[Handler] = []
    force_https: bool | None = None
    proxy_proto_options: ProxyProtoOptions | None = None
    tls_options: TlsOptions | None = None
    http_options: HttpOptions | None = None

    @model_validator(mode="after")
    def _one_port_or_a_range(self) -> ServicePort:
        if (self.port is None) == (self.start_port is None):
            raise ValueError("give port, or start_port and end_port (not both)")
        if self.start_port is not None and (self.end_port is None
                                            or self.end_port < self.start_port):
            raise ValueError("end_port must be given, and at least start_port")
        if self.port is not None and self.end_port is not None:
            raise ValueError("end_port goes with start_port, not port")
        if self.proxy_proto_options is not None and "proxy_proto" not in self.handlers:
            raise ValueError("proxy_proto_options needs the proxy_proto handler")
        return self


class Service(_Strict):
    protocol: Literal["tcp", "udp"] = "tcp"
    internal_port: int = Field(ge=1, le=65535)
    ports: list[ServicePort] = []
    processes: list[str] | None = None
    auto_stop_machines: bool | Literal["off", "stop", "suspend"] = "off"
    auto_start_machines: bool = True
    min_machines_running: int = Field(default=0, ge=0)
    concurrency: Concurrency | None = None
    tcp_checks: list[TomlCheck] = []
    http_checks: list[TomlCheck] = []


class Vm(_Strict):
    size: str | None = None
    cpus: int | None = Field(default=None, ge=1, le=64)
    cpu_kind: Literal["shared", "performance"] | None = None
    memory: int | str | None = None  # MB, or "512mb" / "1gb" as fly.toml writes it
    processes: list[str] | None = None
    isolation: Isolation | None = None  # container (unset), sandbox or vm: docs/isolation.md

    @field_validator("size")
    @classmethod
    def _known_size(cls, value: str | None) -> str | None:
        if value is not None:
            preset(value)
        return value

    def guest(self) -> Guest:
        kind, cpus, memory = preset(self.size) if self.size else ("shared", 1, 256)
        return Guest(cpu_kind=self.cpu_kind or kind, cpus=self.cpus or cpus,
                     memory_mb=megabytes(self.memory) if self.memory is not None else memory,
                     isolation=self.isolation)


class Deploy(_Strict):
    strategy: Literal["rolling", "immediate", "canary", "bluegreen"] = "rolling"
    max_unavailable: float = Field(default=1, gt=0)  # a count, or a fraction of a group if < 1
    release_command: str | None = None
    wait_timeout: str = "5m"

    _durations = field_validator("wait_timeout")(_duration)


class Mount(_Strict):
    source: str
    destination: str
    processes: list[str] | None = None
    initial_size: str | None = None


class AppConfig(_Strict):
    app: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9][a-z0-9-]*$")
    primary_region: str | None = None
    build: Build = Build()
    env: dict[str, str] = {}
    processes: dict[str, str] = {}
    http_service: HttpService | None = None
    services: list[Service] = []
    checks: dict[str, TomlCheck] = {}
    vm: list[Vm] = []
    deploy: Deploy = Deploy()
    mounts: list[Mount] = []

    @field_validator("processes")
    @classmethod
    def _commands_split(cls, value: dict[str, str]) -> dict[str, str]:
        for group, command in value.items():
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", group):
                raise ValueError(f"process group {group!r}: use lowercase letters, digits, - or _")
            if not shlex.split(command):
                raise ValueError(f"process group {group!r} has an empty command")
        return value

    @property
    def groups(self) -> list[str]:
        return sorted(self.processes) or [DEFAULT_GROUP]

    @property
    def process_driver(self) -> bool:
        return not self.build.image and not self.build.dockerfile


def megabytes(value: int | str) -> int:
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"\s*(\d+)\s*(mb|gb)?\s*", value.lower())
    if not match:
        raise ValueError(f"memory {value!r}: write a number of MB, or like '512mb' or '1gb'")
    return int(match.group(1)) * (1024 if match.group(2) == "gb" else 1)


def config_file(path: str | Path) -> Path:
    """The file ``-c`` means: a file as it is; a directory, its bodega.toml (else fly.toml)."""
    path = Path(path)
    if not path.is_dir():
        return path
    for name in ("bodega.toml", "fly.toml"):
        if (path / name).is_file():
            return path / name
    raise ConfigError(f"{path}: no bodega.toml in this directory (write one with "
                      "`bodega launch`, or pass -c FILE)")


def load(path: str | Path) -> tuple[AppConfig, list[str]]:
    """The config and the warnings for ignored keys; ``ConfigError`` names file, line, field.

    ``path`` may be a directory: its bodega.toml is read."""
    path = config_file(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse(text, str(path))


def parse(text: str, name: str = "bodega.toml") -> tuple[AppConfig, list[str]]:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    warnings = _drop_ignored(raw, text, name)
    try:
        return AppConfig.model_validate(raw), warnings
    except ValidationError as exc:
        raise ConfigError(describe(exc, text, name, AppConfig, IGNORED)) from None


def _drop_ignored(raw: dict[str, Any], text: str, name: str) -> list[str]:
    warnings = []
    for section, keys in IGNORED.items():
        table = raw if section == "" else raw.get(section)
        if not isinstance(table, dict):
            continue
        for key in sorted(set(table) & keys):
            del table[key]
            where = [section, key] if section else [key]
            warnings.append(f"{name}:{line_of(text, where)}: {'.'.join(where)} is ignored "
                            "by bodega")
    return warnings
