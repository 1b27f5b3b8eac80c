"""A package's public names loaded on first use (PEP 562), one definition for every package.

A package re-exports names from its modules so callers write ``bodega.model.Machine``;
importing them all at once would make a command that needs one small module pay for the
rest (pydantic models, the daemon). ``lazy`` gives the package a ``__getattr__`` that
imports a name's module when the name is first read, and keeps it in the package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy(package: str, namespace: MutableMapping[str, Any],
         modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package`` (its ``globals()`` as ``namespace``): each name
    of ``modules`` comes from the module named beside it, relative to the package."""
    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value
    return __getattr__
