"""Which fly.toml keys bodega acts on, which it knows and leaves (and why), and which
nobody reads; pure.

A key bodega acts on is a field of ``deploy/core/config.py``'s models. A key flyctl
knows that bodega does not act on is in ``FLY_ONLY``, with the reason a user is
told. Anything else is a key neither reads ("unknown key"): flyctl loads such a
file without a word and ``fly config validate`` warns, and so does bodega (a
refusal only with ``--strict``). ``sift`` takes both kinds out of a file's table before the
models see it, and says what it took, so a file flyctl loads always gets as far
as the models' own checks.

``FLY_ONLY`` names tables with list indexes and check names left out:
``services.ports`` is every port of every ``[[services]]``, ``checks`` every
named check.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.fly_shapes import Table

_BUILDER = ("bodega builds Dockerfiles: give [build] dockerfile or image, a Dockerfile beside "
            "the config, or deploy with --image")
_NO_MACHINE_CHECKS = "bodega runs no check machines during a deploy; its health checks decide"
_NO_AUTO_EXTEND = "bodega does not grow volumes by itself: `bodega volumes extend` does"
_OPTIONS = "passed to the machine's config; bodega's edge acts on h2_backend only"

# flyctl's keys bodega leaves, by table: key -> why (said in the warning).
FLY_ONLY: dict[str, dict[str, str]] = {
    "": {
        "console_command": "`bodega machine exec` runs any command; there is no console "
                           "machine",
        "host_dedication_id": "bodega has no dedicated hosts",
        "machine_checks": _NO_MACHINE_CHECKS,
        "machine_config": "bodega runs one container per machine",
        "container": "bodega runs one container per machine",
    },
    "build": {
        "builder": _BUILDER, "builtin": _BUILDER, "buildpacks": _BUILDER, "settings": _BUILDER,
        "compose": "bodega runs one container per machine",
        "compression": "buildah chooses the layers' compression",
        "compression_level": "buildah chooses the layers' compression",
    },
    "deploy": {
        "release_command_timeout": "a release command runs until it ends or the deploy's "
                                   "wait_timeout",
        "release_command_vm": "a release command runs in a machine of the app's first group's "
                              "size",
        "seed_command": "bodega runs release_command only",
    },
    "experimental": {
        key: "an experimental flag of Fly's platform; bodega has no such switch"
        for key in ("auto_rollback", "enable_consul", "enable_etcd", "lazy_load_images",
                    "attached", "machine_config", "allowed_public_ports", "private_network")
    },
    "http_service": {"machine_checks": _NO_MACHINE_CHECKS},
    "services": {"machine_checks": _NO_MACHINE_CHECKS},
    "mounts": {
        "auto_extend_size_threshold": _NO_AUTO_EXTEND,
        "auto_extend_size_increment": _NO_AUTO_EXTEND, "auto_extend_size_limit": _NO_AUTO_EXTEND,
    },
    "vm": {
        "host_dedication_id": "bodega has no dedicated hosts",
        "persist_rootfs": "a machine's root filesystem is made afresh at each start",
        "kernel_args": "bodega boots its own kernel with its own arguments",
    },
}


class Sifted(BaseModel):
    """One key taken out of a file before the models read it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    loc: tuple[str, ...]  # where: table names, list indexes and check names
    kind: Literal["ignored", "unknown"]
    message: str


def sift(raw: Table, model: type[BaseModel]) -> list[Sifted]:
    """Take out of ``raw`` (in place) every key ``model`` does not read; what was taken."""
    taken: list[Sifted] = []
    _sift(raw, model, (), (), taken)
    return taken


def _sift(table: Table, model: type[BaseModel], path: tuple[str, ...],
          loc: tuple[str, ...], taken: list[Sifted]) -> None:
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    fly_only = FLY_ONLY.get(".".join(path), {})
    for name in list(table):
        here = (*loc, name)
        field = fields.get(name)
        if field is not None:
            _into(table[name], field.annotation, (*path, name), here, taken)
        elif name in fly_only:
            del table[name]
            taken.append(Sifted(loc=here, kind="ignored",
                                message=f"ignored by bodega: {fly_only[name]}"))
        else:
            del table[name]
            close = difflib.get_close_matches(name, [*fields, *fly_only], n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            taken.append(Sifted(loc=here, kind="unknown",
                                message=f"unknown key{hint}"))


def _into(value: Any, annotation: Any, path: tuple[str, ...], loc: tuple[str, ...],
          taken: list[Sifted]) -> None:
    """Sift what ``value`` holds, as far as ``annotation`` says it holds tables."""
    annotation = _table_type(annotation)
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if isinstance(value, dict):
            _sift(value, annotation, path, loc, taken)
    elif origin is list and isinstance(value, list):
        inner = _table_type(get_args(annotation)[0])
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    _sift(item, inner, path, (*loc, str(index)), taken)
    elif origin in (dict, Mapping) and isinstance(value, dict):
        inner = _table_type(get_args(annotation)[-1])
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            for name, item in value.items():
                if isinstance(item, dict):
                    _sift(item, inner, path, (*loc, name), taken)


def _table_type(annotation: Any) -> Any:
    """``X | None`` as ``X``; a union of a table with plain values as the table."""
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            if get_origin(arg) in (list, dict) or (isinstance(arg, type)
                                                   and issubclass(arg, BaseModel)):
                return arg
    return annotation
