"""A VM's state to and from its snapshot file, the pure part: what qemu's QMP says of its
vCPUs and its migration, and what a suspend or a resume does next from there.

A suspend writes the snapshot with QMP ``migrate`` to a partial file, keeps it (fsync,
rename: only a whole snapshot ever has the snapshot's name) and ends qemu; a resume
starts qemu waiting for one (``-incoming defer``), gives it the file
(``migrate-incoming``), and lets it run (``cont``) once the migration has completed.
Each step is decided afresh from what qemu and the files say, so a worker killed
anywhere in either repeats the step it was in, never one already done.

    suspend_step    qemu's run state     its migration   files           step
                    any                  under way       any             WAIT
                    postmigrate          any             snapshot        QUIT
                    postmigrate          completed       partial only    KEEP
                    anything else                                        MIGRATE

    resume_step     running                                              ADOPT
                    paused, postmigrate  not under way                   CONT
                    anything else (inmigrate: the snapshot not loaded)   REDO

A live move (``live.py``) migrates the running VM to the target's qemu instead of a
file, while the guest runs; its source decides from its own qemu, its target from its:

    live_step       under way                                            WAIT
    (the source)    postmigrate          completed                       SWITCH
                    running              none, failed, cancelled         MIGRATE
                    paused (a failed migration that left it stopped)     CONT

    arrival_step    running                                              RUNS
    (the target)    paused, postmigrate  completed                       CONT
                    inmigrate            none                            LISTEN
                    anything else (a load that failed or is under way)   WAIT
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

# query-migrate's statuses of a migration that has not ended (qemu's MigrationStatus).
UNDER_WAY = frozenset({"setup", "active", "pre-switchover", "device", "wait-unplug",
                       "postcopy-active", "postcopy-paused", "postcopy-recover", "cancelling",
                       "colo"})
FAILED = frozenset({"failed", "cancelled"})


class RunStatus(BaseModel):
    """query-status: the VM's run state (running, paused, inmigrate, postmigrate, ...)."""

    model_config = ConfigDict(extra="ignore")
    status: str = ""
    running: bool = False


class Migration(BaseModel):
    """query-migrate: the last migration in or out of this qemu; none before any."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    status: str = "none"
    error_desc: str = Field(default="", alias="error-desc")
    downtime: int | None = None  # ms the vCPUs were stopped, once completed (the source's)
    total_time: int | None = Field(default=None, alias="total-time")  # ms, start to end

    @property
    def under_way(self) -> bool:
        return self.status in UNDER_WAY

    def ended(self) -> bool:
        """True once completed, False while under way; a ``ValueError`` saying why if it
        failed or was cancelled."""
        if self.status in FAILED:
            raise ValueError(f"the migration {self.status}" +
                             (f": {self.error_desc}" if self.error_desc else ""))
        return self.status == "completed"


class SuspendStep(StrEnum):
    MIGRATE = "migrate"  # stop the vCPUs, write the snapshot to its partial file afresh
    WAIT = "wait"  # a migration under way (an earlier try's): until it ends
    KEEP = "keep"  # the partial file is whole: fsync it and give it the snapshot's name
    QUIT = "quit"  # the snapshot is in place, of this stop: end qemu


def suspend_step(run: RunStatus, migration: Migration, partial: bool,
                 snapshot: bool) -> SuspendStep:
    """The next step of a suspend whose qemu still runs. ``postmigrate`` is the state
    qemu's vCPUs stay in after a migration out of it completed: nothing ran since."""
    if migration.under_way:
        return SuspendStep.WAIT
    if run.status == "postmigrate":
        if snapshot:
            return SuspendStep.QUIT
        if partial and migration.status == "completed":
            return SuspendStep.KEEP
    return SuspendStep.MIGRATE


class ResumeStep(StrEnum):
    ADOPT = "adopt"  # it runs: the resume is done
    CONT = "cont"  # its vCPUs are stopped with its state in place: let them run
    REDO = "redo"  # its state is not loaded (a resume cut short): end it and resume afresh


def resume_step(run: RunStatus, migration: Migration) -> ResumeStep:
    """The next step of a resume that finds a qemu of the machine's run alive: the
    suspend's own (its quit never came) or one an earlier resume started."""
    if run.running:
        return ResumeStep.ADOPT
    if run.status in ("paused", "postmigrate") and not migration.under_way:
        return ResumeStep.CONT
    return ResumeStep.REDO


class LiveStep(StrEnum):
    MIGRATE = "migrate"  # migrate the running VM to the target (again, after a failure)
    WAIT = "wait"  # a migration under way (an earlier try's): until it ends
    SWITCH = "switch"  # its state is all on the target: the target lets it run
    CONT = "cont"  # stopped here by a migration that failed: let it run, then migrate


def live_step(run: RunStatus, migration: Migration) -> LiveStep:
    """The source's next step of a live move, from its qemu: a worker killed anywhere in
    it repeats the step it was in. ``postmigrate`` with a completed migration is a VM
    whose state went over whole and that never ran here since."""
    if migration.under_way:
        return LiveStep.WAIT
    if run.status == "postmigrate" and migration.status == "completed":
        return LiveStep.SWITCH
    if run.running:
        return LiveStep.MIGRATE
    return LiveStep.CONT


class ArrivalStep(StrEnum):
    LISTEN = "listen"  # waits for the state: take it from the stream
    WAIT = "wait"  # taking it, or failed: until it ends
    CONT = "cont"  # its state is loaded: let it run
    RUNS = "runs"  # it runs here already


def arrival_step(run: RunStatus, migration: Migration) -> ArrivalStep:
    """The target's next step with the qemu a live move's import started (``-incoming
    defer``)."""
    if run.running:
        return ArrivalStep.RUNS
    if run.status in ("paused", "postmigrate") and migration.status == "completed":
        return ArrivalStep.CONT
    if run.status == "inmigrate" and migration.status == "none":
        return ArrivalStep.LISTEN
    return ArrivalStep.WAIT
