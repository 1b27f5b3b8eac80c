"""Which answer an app delete gives for what its machine destroys returned."""

from __future__ import annotations

from bodega.broker.apps.delete import delete_failure
from bodega.model.errors import (
    BodegaError,
    Conflict,
    Indeterminate,
    NotFound,
    PreconditionFailed,
    Unavailable,
    from_wire,
)


def test_all_done_or_already_gone_is_no_failure() -> None:
    assert delete_failure("x", [None, {"ok": True}, NotFound("machine not found")]) is None
    assert delete_failure("x", []) is None


def test_a_workers_4xx_keeps_its_code_and_status() -> None:
    failure = delete_failure("every machine of a", [None, Conflict("lease currently held")])
    assert failure is not None
    assert failure.http_status == 409
    assert failure.status == "failed_precondition"
    assert "every machine of a" in failure.message
    assert "lease currently held" in failure.message
    assert delete_failure("x", [PreconditionFailed("attached")]).http_status == 412  # type: ignore[union-attr]


def test_anything_else_is_a_503_never_a_500() -> None:
    for result in (Unavailable("worker w1 did not answer"), Indeterminate("no answer"),
                   BodegaError("boom"), from_wire(500, {"error": "internal"}),
                   RuntimeError("unexpected"), OSError("connection reset")):
        failure = delete_failure("x", [result])
        assert failure is not None
        assert failure.http_status == 503, result
        assert failure.status == "unavailable"
