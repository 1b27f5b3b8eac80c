"""``bodega.toml``, which is fly.toml: read as flyctl reads it, checked by pydantic.

A file goes through three steps. ``fly_shapes`` rewrites the older shapes
flyctl's templates wrote into one; ``fly_keys`` takes out the keys bodega does
not act on, each said as a warning (flyctl's own keys with the reason bodega
leaves them, any other as unknown: an error only with ``strict``); the models
here read the rest and refuse what no deploy could run, each problem naming
file, line and key. ``[processes]`` maps a process group to its command, split
as a shell splits words (``shlex``) but never run through one; an empty command
runs the image's own.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bodega.deploy.core.fly_files import TomlFile
from bodega.deploy.core.fly_keys import sift
from bodega.deploy.core.fly_services import HttpService, Service, Strict, TomlCheck, duration
from bodega.deploy.core.fly_shapes import ShapeError, rewrite
from bodega.deploy.core.machine_keys import DEFAULT_GROUP as DEFAULT_GROUP
from bodega.deploy.core.toml_errors import MISSING, line_of, problems
from bodega.model.limits import MAX_SWAP_MB, check_static_path
from bodega.model.machine_config import SIGNALS, Guest, Isolation, preset

PROCESS_IMAGE = "process"  # the image recorded for machines the process driver runs

class Note(BaseModel):
    """One thing said about a file: where (file, line, the key dotted as flyctl names it)
    and what."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(ValueError):
    """A bodega.toml that cannot be used: its errors (the first says file, line and
    key) and the warnings read before them."""

    def __init__(self, errors: list[Note], warnings: list[Note] | None = None) -> None:
        super().__init__(str(errors[0]))
        self.errors = errors
        self.warnings = warnings or []


class Build(Strict):
    image: str | None = None
    dockerfile: str | None = None  # built with buildah and pushed by `bodega deploy`
    ignorefile: str | None = None  # a .dockerignore of another name
    args: dict[str, str] = {}  # --build-arg NAME=VALUE each
    build_target: str | None = Field(default=None, alias="build-target")  # --target


class Vm(Strict):
    size: str | None = None
    cpus: int | None = Field(default=None, ge=1, le=64)
    cpu_kind: Literal["shared", "performance"] | None = None
    memory: str | None = None  # "512mb", "1gb", "8g", or MB (fly_shapes makes numbers text)
    memory_mb: int | None = Field(default=None, ge=1)
    gpus: int | None = Field(default=None, ge=0, le=16)
    gpu_kind: str | None = None
    processes: list[str] | None = None
    isolation: Isolation | None = None  # container (unset), sandbox or vm: docs/isolation.md

    @field_validator("size")
    @classmethod
    def _known_size(cls, value: str | None) -> str | None:
        if value is not None and value not in GPU_SIZES:
            preset(value)
        return value

    @field_validator("memory")
    @classmethod
    def _a_size(cls, value: str | None) -> str | None:
        if value is not None:
            megabytes(value)
        return value

    def guest(self) -> Guest:
        gpu_kind, gpus = None, None
        if self.size in GPU_SIZES:
            gpu_kind, gpus = GPU_SIZES[self.size], 1
            kind, cpus, memory = "performance", 8, 16 * 2048
        else:
            kind, cpus, memory = preset(self.size) if self.size else ("shared", 1, 256)
        if self.memory is not None:
            memory = megabytes(self.memory)
        return Guest(cpu_kind=self.cpu_kind or kind, cpus=self.cpus or cpus,
                     memory_mb=self.memory_mb or memory, isolation=self.isolation,
                     gpus=self.gpus if self.gpus is not None else gpus,
                     gpu_kind=self.gpu_kind or gpu_kind)


# Fly's GPU sizes: one GPU of the kind, 8 performance CPUs, 32 GB.
GPU_SIZES = {"a100-40gb": "a100-pcie-40gb", "a100-80gb": "a100-sxm4-80gb", "l40s": "l40s",
             "a10": "a10"}


class Deploy(Strict):
    strategy: Literal["rolling", "immediate", "canary", "bluegreen"] = "rolling"
    max_unavailable: float = Field(default=1, gt=0)  # a count, or a fraction of a group if < 1
    release_command: str | None = None
    wait_timeout: str = "5m"

    _durations = field_validator("wait_timeout")(duration)


class Mount(Strict):
    source: str = Field(min_length=1)
    destination: str = Field(min_length=1)
    processes: list[str] | None = None
    initial_size: str | None = None  # "10gb", or GB (fly_shapes makes numbers text)
    # The snapshot policy of a volume the deploy creates for it (docs/volumes.md).
    snapshot_retention: int | None = Field(default=None, ge=1, le=60)  # days
    scheduled_snapshots: bool | None = None

    @field_validator("initial_size")
    @classmethod
    def _a_size(cls, value: str | None) -> str | None:
        if value is not None:
            gigabytes(value)
        return value


class Static(Strict):
    """``[[statics]]``: files of the image the edge serves at ``url_prefix`` (flyctl's
    keys; every group's machines get them, as flyctl gives them)."""

    guest_path: str = Field(min_length=1)
    url_prefix: str = Field(min_length=1)
    tigris_bucket: str | None = None  # Fly's object storage: warned about, not served
    index_document: str | None = None

    @field_validator("guest_path", "url_prefix")
    @classmethod
    def _plain_absolute(cls, value: str, info: ValidationInfo) -> str:
        check_static_path(str(info.field_name), value)
        return value


class TomlMetrics(Strict):
    """``[metrics]`` (or ``[[metrics]]``, one per process group): where a machine serves its
    own metrics, for the cluster's metrics store to scrape (docs/metrics.md)."""

    port: int = Field(ge=1, le=65535)
    path: str = Field(default="/metrics", min_length=1, max_length=512, pattern=r"^/")
    https: bool = False
    processes: list[str] | None = None


class Experimental(Strict):
    cmd: list[str] | None = None  # init.cmd: the image's CMD replaced
    entrypoint: list[str] | None = None  # init.entrypoint
    exec: list[str] | None = None  # init.exec: the whole command


class RestartRule(Strict):
    policy: Literal["always", "never", "on-failure"]
    retries: int | None = Field(default=None, ge=0, le=1000)
    processes: list[str] | None = None


class AppConfig(Strict):
    app: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9][a-z0-9-]*$")
    primary_region: str | None = None
    kill_signal: str | None = None  # stop_config.signal
    kill_timeout: str | None = None  # stop_config.timeout
    swap_size_mb: int | None = Field(default=None, ge=0, le=MAX_SWAP_MB)  # init.swap_size_mb
    build: Build = Build()
    env: dict[str, str] = {}
    processes: dict[str, str] = {}
    experimental: Experimental | None = None
    http_service: HttpService | None = None
    services: list[Service] = []
    checks: dict[str, TomlCheck] = {}
    vm: list[Vm] = []
    deploy: Deploy = Deploy()
    mounts: list[Mount] = []
    restart: list[RestartRule] = []
    files: list[TomlFile] = []
    statics: list[Static] = []
    metrics: list[TomlMetrics] = []

    _durations = field_validator("kill_timeout")(duration)

    @field_validator("kill_signal")
    @classmethod
    def _a_signal(cls, value: str | None) -> str | None:
        if value is not None and value not in SIGNALS:
            raise ValueError(f"unknown signal {value!r} (use e.g. SIGINT, SIGTERM)")
        return value

    @field_validator("processes")
    @classmethod
    def _commands_split(cls, value: dict[str, str]) -> dict[str, str]:
        for group, command in value.items():
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", group):
                raise ValueError(f"process group {group!r}: use lowercase letters, digits, - or _")
            shlex.split(command)  # an empty one runs the image's own command
        return value

    @model_validator(mode="after")
    def _groups_named_exist(self) -> AppConfig:
        named = [("http_service.processes", (self.http_service.processes or [])
                  if self.http_service else []),
                 *[(f"services.{i}.processes", s.processes or [])
                   for i, s in enumerate(self.services)],
                 *[(f"mounts.{i}.processes", m.processes or [])
                   for i, m in enumerate(self.mounts)],
                 *[(f"files.{i}.processes", f.processes or [])
                   for i, f in enumerate(self.files)]]
        for where, groups in named:
            for group in groups:
                if group not in self.groups:
                    raise ValueError(f"{where} names process group {group!r}, which "
                                     f"[processes] does not define ({', '.join(self.groups)})")
        for group in self.groups:
            mounts = [m.source for m in self.mounts if self.applies(m.processes, group)]
            if len(mounts) > 1:
                raise ValueError(f"process group {group!r} has more than one mount "
                                 f"({', '.join(mounts)}): a machine mounts one volume")
        return self

    @property
    def groups(self) -> list[str]:
        return sorted(self.processes) or [DEFAULT_GROUP]

    @property
    def default_group(self) -> str:
        """The group a section naming no ``processes`` is for, as flyctl picks it: ``app``
        when there is one, else the first by name."""
        return DEFAULT_GROUP if DEFAULT_GROUP in self.groups else self.groups[0]

    def applies(self, processes: list[str] | None, group: str) -> bool:
        """Whether a section with ``processes`` is for ``group``: the groups it names, or
        the default group when it names none."""
        return group in processes if processes else group == self.default_group

    @property
    def process_driver(self) -> bool:
        return not self.build.image and not self.build.dockerfile


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?\s*", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def megabytes(value: int | str) -> int:
    """Memory as flyctl reads it: a number is MB; ``512mb``, ``1gb``, ``8g``, ``1GiB`` are
    powers of 1024."""
    if isinstance(value, int):
        return value
    match = _SIZE.fullmatch(value)
    if not match:
        raise ValueError(f"memory {value!r}: write a number of MB, or like '512mb' or '1gb'")
    unit = match.group(2).lower() or "m"
    return int(float(match.group(1)) * 1024 ** _POWERS[unit] / 1024 ** 2)


def gigabytes(value: str) -> int:
    """A volume size as flyctl reads it: a number is GB; ``10gb``, ``500mb`` are powers
    of 1000, rounded up to a whole GB."""
    match = _SIZE.fullmatch(value)
    if not match:
        raise ValueError(f"size {value!r}: write a number of GB, or like '10gb'")
    unit = match.group(2).lower() or "g"
    size = float(match.group(1)) * 1000 ** _POWERS[unit]
    return max(1, -(-int(size) // 1000 ** 3))


def config_file(path: str | Path) -> Path:
    """The file ``-c`` means: a file as it is; a directory, its bodega.toml (else fly.toml);
    a bodega.toml that is not there, the fly.toml beside it (an app moving from Fly)."""
    path = Path(path)
    if not path.is_dir():
        fly = path.with_name("fly.toml")
        return fly if path.name == "bodega.toml" and not path.exists() and fly.is_file() \
            else path
    for name in ("bodega.toml", "fly.toml"):
        if (path / name).is_file():
            return path / name
    raise _whole(str(path), "no bodega.toml or fly.toml in this directory (write one with "
                 "`bodega launch`, or pass -c FILE)")


def load(path: str | Path, strict: bool = False,
         app: str | None = None) -> tuple[AppConfig, list[Note]]:
    """The config and what was said about it (keys left, keys unknown); ``ConfigError``
    when it cannot be used, naming file, line and key. ``path`` may be a directory: its
    bodega.toml (else fly.toml) is read; ``app`` (``-a``) wins over the file's."""
    path = config_file(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        beside = " (nor a fly.toml beside it)" if path.name == "bodega.toml" else ""
        raise _whole(str(path), f"no such file{beside}: pass -c FILE, or run where the "
                     "app's config is") from None
    except OSError as exc:
        raise _whole(str(path), f"cannot read: {exc.strerror or exc}") from None
    return parse(text, str(path), strict, app)


def parse(text: str, name: str = "bodega.toml", strict: bool = False,
          app: str | None = None) -> tuple[AppConfig, list[Note]]:
    """``text`` read as flyctl reads a fly.toml (``fly_shapes``), keys bodega does not act
    on taken out with a warning each (``fly_keys``; an unknown one is an error when
    ``strict``), the rest checked by the models."""
    try:
        raw = rewrite(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise _whole(name, str(exc)) from None
    except ShapeError as exc:
        key = tuple(exc.key.split("."))
        raise ConfigError([Note(file=name, line=line_of(text, key), key=exc.key,
                                message=str(exc))]) from None
    if app is not None:
        raw["app"] = app
    sifted = sift(raw, AppConfig)
    notes = [Note(file=name, line=line_of(text, s.loc), key=".".join(s.loc), message=s.message)
             for s in sifted]
    unknown = [n for n, s in zip(notes, sifted, strict=True) if s.kind == "unknown"]
    warnings = [n for n in notes if strict is False or n not in unknown]
    if strict and unknown:
        raise ConfigError(unknown, warnings)
    try:
        return AppConfig.model_validate(raw), warnings
    except ValidationError as exc:
        errors = [Note(file=name, line=line_of(text, at), key=".".join(key), message=message)
                  for key, at, message in problems(exc)]
        # A typo'd key leaves the key it meant missing, or its table wrong as a whole (a
        # port with no port): the typo is the error to show.
        wrong = {_table(e.key) if e.message == MISSING else e.key for e in errors}
        above = {part for key in wrong for part in _tables_above(key)}
        typos = [n for n in unknown if _table(n.key) in wrong
                 or (_table(n.key) in above and "did you mean" in n.message)]
        raise ConfigError(typos + errors, warnings) from None


def unserved_statics(config: AppConfig, path: Path) -> list[Note]:
    """The ``[[statics]]`` the edge will not serve, each a warning: one of a Tigris bucket
    (bodega has no object storage), every one of an app run as host processes (no image).
    Asked once the image is known (``build.image`` set for one a deploy builds)."""
    text = path.read_text() if config.statics else ""
    said: list[Note] = []
    for index, static in enumerate(config.statics):
        if config.process_driver:
            loc: tuple[str, ...] = ("statics", str(index))
            why = ("not served: an app run as host processes has no image to serve files "
                   "from; requests under its url_prefix go to the machines")
        elif static.tigris_bucket:
            loc = ("statics", str(index), "tigris_bucket")
            why = ("not served: bodega has no object storage; requests under its url_prefix "
                   "go to the machines")
        else:
            continue
        said.append(Note(file=str(path), line=line_of(text, loc), key=".".join(loc),
                         message=why))
    return said


def _table(key: str) -> str:
    return key.rpartition(".")[0]


def _tables_above(key: str) -> list[str]:
    """``a.b.c``: ``a.b``, ``a`` and the top (``""``)."""
    parts = key.split(".")
    return [".".join(parts[:n]) for n in range(len(parts))]


def _whole(name: str, message: str) -> ConfigError:
    """An error about the whole file (unreadable, not TOML)."""
    return ConfigError([Note(file=name, line=0, key="", message=message)])
