"""What `bodega up` says of a component that exited while starting: its last words."""

from __future__ import annotations

from bodega.cluster.supervisor import said_last

TRACEBACK = """\
2026-11-26T21:45:11 INFO  worker[ams-2] bodega.worker: starting
Traceback (most recent call last):
  File "bodega/worker/daemon.py", line 197, in start
    await self.private.start(self.registry, machines)
bodega.networking.commands.CommandFailed: wg set bwg1 failed: Unable to modify interface
2026-11-26T21:45:11 ERROR worker[ams-2] asyncio: Unclosed client session
client_session: <aiohttp.client.ClientSession object at 0x7f190215a410>
""".splitlines()


def test_a_worded_error_is_said_as_worded() -> None:
    lines = ["Error: an older one", *TRACEBACK, "Error: cannot listen on 0.0.0.0:1 (UDP)"]
    assert said_last(lines) == "cannot listen on 0.0.0.0:1 (UDP)"


def test_an_unworded_error_is_said_by_its_tracebacks_exception_line() -> None:
    assert said_last(TRACEBACK) == ("bodega.networking.commands.CommandFailed: wg set bwg1 "
                                    "failed: Unable to modify interface")


def test_the_last_traceback_is_the_one_said() -> None:
    chained = [*TRACEBACK, "", "Traceback (most recent call last):", '  File "x.py", line 1',
               "    boom()", "RuntimeError: the last one"]
    assert said_last(chained) == "RuntimeError: the last one"


def test_nothing_is_said_of_a_quiet_log() -> None:
    assert said_last(["2026-11-26T21:45:11 INFO  worker[ams-2] bodega.worker: starting"]) == ""
