"""Changes that only annotate a machine: a cordon, its metadata, a health check's result.

None of them begins an operation or changes the machine's state; each is
logged as a note (with an event for a check), so the machine's history says
who changed what. Pure, like the rest of the core (``rules.py`` dispatches here).
"""

from __future__ import annotations

from bodega.model.errors import BadRequest, PreconditionFailed
from bodega.model.machine import EventRequest
from bodega.model.states import MachineState as S
from bodega.worker.core import checks
from bodega.worker.core.decisions import (
    Changes,
    CheckResult,
    Cordon,
    Decision,
    EventSpec,
    Note,
    SetMetadata,
)
from bodega.worker.core.policy import MAX_METADATA_KEYS
from bodega.worker.core.records import MachineRow

NOTHING = Decision()  # the decision to change nothing


def cordon(stimulus: Cordon) -> Decision:
    return Decision(changes=Changes(cordoned=stimulus.cordoned), notes=(
        Note("action", "cordon" if stimulus.cordoned else "uncordon", {}),))


def set_metadata(record: MachineRow, stimulus: SetMetadata) -> Decision:
    for key, value in stimulus.changes.items():
        if not key or len(key) > 128 or (value is not None and len(value) > 4096):
            raise BadRequest("metadata keys are 1-128 characters, values at most 4096")
    if stimulus.version is not None and stimulus.version != record.instance_id:
        raise PreconditionFailed(
            f"failed_precondition: machine_version {stimulus.version} is not the current "
            f"version {record.instance_id}"
        )
    metadata = dict(record.config.metadata or {})
    for key, value in stimulus.changes.items():
        if value is None:
            metadata.pop(key, None)
        else:
            metadata[key] = value
    if len(metadata) > MAX_METADATA_KEYS:
        raise BadRequest(f"at most {MAX_METADATA_KEYS} metadata keys")
    config = record.config.model_copy(update={"metadata": metadata or None})
    return Decision(changes=Changes(config=config),
                    notes=(Note("action", "metadata", {"changes": dict(stimulus.changes)}),))


def check_result(record: MachineRow, stimulus: CheckResult) -> Decision:
    """Record a check's new status; a probe of a former run, or no change, writes nothing."""
    if record.state != S.STARTED or record.start_seq != stimulus.start_seq:
        return NOTHING
    states = checks.current(record.checks, stimulus.start_seq)
    if states.status(stimulus.name) == stimulus.status:
        return NOTHING
    detail = {"name": stimulus.name, "status": stimulus.status, "output": stimulus.output}
    return Decision(
        changes=Changes(checks=states.with_result(
            stimulus.name, stimulus.status, stimulus.output, stimulus.at)),
        notes=(Note("supervise", "check", detail,
                    EventSpec("check", stimulus.status, "flyd", EventRequest(
                        name=stimulus.name, status=stimulus.status,
                        output=stimulus.output))),))
