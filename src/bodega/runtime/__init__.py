"""What every daemon runs on: serving, lifecycle, logging, failpoints, SQLite, host facts."""

from bodega.runtime import hostinfo
from bodega.runtime.binding import BindError
from bodega.runtime.failpoints import Failpoints
from bodega.runtime.lifecycle import (
    event_loop_policy,
    private_dir,
    run_daemon,
    until_stopped,
    write_json_atomic,
)
from bodega.runtime.logs import configure
from bodega.runtime.serve import Served, bind, serve
from bodega.runtime.sqlite import open_database

__all__ = [
    "BindError",
    "Failpoints",
    "Served",
    "bind",
    "configure",
    "event_loop_policy",
    "hostinfo",
    "open_database",
    "private_dir",
    "run_daemon",
    "serve",
    "until_stopped",
    "write_json_atomic",
]
