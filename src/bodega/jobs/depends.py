"""Dependencies between jobs: a job submitted ``after`` others waits until they succeed.

Pure: the home's upkeep reads the state of each job waited for (its own store for jobs it
is home to, the registry view for the rest) and asks ``gate`` what that means. Every one
succeeded: the job's tasks may run. One failed or was cancelled (it will not succeed any
more: its retries are over): the job fails, none of its tasks run. A job waited for that
no home knows of any more (finished and dropped by retention, or its home lost) is given
``GONE_AFTER`` seconds to show up in the view (a job submitted a moment ago on another
home may not be there yet) and then fails the job too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

GONE_AFTER = 300.0
SUCCEEDED = "succeeded"
FAILED_FOR_GOOD = ("failed", "cancelled")


@dataclass(frozen=True)
class Gate:
    """``open``: run. ``failed``: why the job fails. Otherwise ``waiting`` lists the jobs
    still waited for."""

    open: bool = False
    failed: str | None = None
    waiting: tuple[str, ...] = ()


def gate(after: tuple[str, ...], states: Mapping[str, str | None], waited: float) -> Gate:
    """From the state of each job in ``after`` (None: not found) and how long the job has
    waited since it was submitted."""
    waiting: list[str] = []
    for name in after:
        state = states.get(name)
        if state in FAILED_FOR_GOOD:
            return Gate(failed=f"job {name} it runs after was {state}")
        if state is None and waited >= GONE_AFTER:
            return Gate(failed=f"job {name} it runs after is not known any more")
        if state != SUCCEEDED:
            waiting.append(name)
    return Gate(open=True) if not waiting else Gate(waiting=tuple(waiting))
