"""Every package states its public surface: ``__all__``, each name really there (ruff keeps
it sorted)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bodega


def packages() -> list[str]:
    found = ["bodega"]
    for info in pkgutil.walk_packages(bodega.__path__, "bodega."):
        if info.ispkg:
            found.append(info.name)
    return sorted(found)


def test_every_subpackage_is_found() -> None:
    assert {"bodega.worker", "bodega.broker", "bodega.model", "bodega.wire"} <= set(packages())


@pytest.mark.parametrize("name", [p for p in packages() if p != "bodega"])
def test_a_package_declares_its_public_names(name: str) -> None:
    package = importlib.import_module(name)
    public = getattr(package, "__all__", None)
    assert public is not None, f"{name} has no __all__"
    assert len(public) == len(set(public)), f"{name}.__all__ names something twice"
    missing = [n for n in public if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
