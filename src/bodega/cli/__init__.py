"""The bodega command line (flyctl's role): daemons, the local cluster, and API commands.

By role: ``daemons/`` (the launchers and the commands that run them), ``commands/`` (the
API's and the offline ones), ``session/`` (contexts, the target, output, errors), each
room above the ones it imports; here, what makes ``bodega`` itself.

Its names load on first use (PEP 562): ``bodega --help`` and a command's own
modules (``bodega.cli.session.context_store``) do not load typer's group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.cli.main import run
    from bodega.cli.root import app

__all__ = [
    "app",
    "run",
]


__getattr__ = lazy(__name__, globals(), {"app": "root", "run": "main"})
