"""What every daemon runs on: serving, lifecycle, logging, failpoints, SQLite, host facts.

Its names load on first use (PEP 562): a module that needs one small part
(``bodega.runtime.waits``) does not pay for the HTTP server beside it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.runtime import hostinfo
    from bodega.runtime.binding import BindError
    from bodega.runtime.failpoints import Failpoints
    from bodega.runtime.lifecycle import (
        StopCause,
        daemon_runtime,
        private_dir,
        run_daemon,
        until_stopped,
        write_json_atomic,
    )
    from bodega.runtime.logs import configure
    from bodega.runtime.serve import Served, bind, serve
    from bodega.runtime.sqlite import open_database

_MODULE = {
    "BindError": "binding",
    "Failpoints": "failpoints",
    "Served": "serve",
    "StopCause": "lifecycle",
    "bind": "serve",
    "configure": "logs",
    "daemon_runtime": "lifecycle",
    "open_database": "sqlite",
    "private_dir": "lifecycle",
    "run_daemon": "lifecycle",
    "serve": "serve",
    "until_stopped": "lifecycle",
    "write_json_atomic": "lifecycle",
}

__all__ = [
    "BindError",
    "Failpoints",
    "Served",
    "StopCause",
    "bind",
    "configure",
    "daemon_runtime",
    "hostinfo",
    "open_database",
    "private_dir",
    "run_daemon",
    "serve",
    "until_stopped",
    "write_json_atomic",
]


def __getattr__(name: str) -> object:
    if name == "hostinfo":  # a module, not a name in one
        return importlib.import_module(f"{__name__}.hostinfo")
    return _names(name)


_names = lazy(__name__, globals(), _MODULE)
