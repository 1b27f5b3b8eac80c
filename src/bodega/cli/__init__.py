"""The bodega command line (flyctl's role): daemons, the local cluster, and API commands.

Its names load on first use (PEP 562): ``bodega --help`` and a command's own
modules (``bodega.cli.context_store``) do not load typer's group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bodega.cli.main import run
    from bodega.cli.root import app

__all__ = [
    "app",
    "run",
]


def __getattr__(name: str) -> Any:
    if name == "run":
        from bodega.cli.main import run

        return run
    if name == "app":
        from bodega.cli.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
