"""The bodega command line (flyctl's role): daemons, the local cluster, and API commands."""

from bodega.cli.main import app, run

__all__ = [
    "app",
    "run",
]
