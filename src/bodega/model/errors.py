"""Errors every bodega service raises and every API renders the same way.

The wire shape is the Fly Machines API ``ErrorResponse``:
``{"error": "<message>", "status": "<code>"}``. ``status`` is a short code
(``unknown``, ``insufficient_capacity``, ``volume_placement_capacity``,
``name_taken``, ...); the HTTP status code carries the class of failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

    from bodega.model.refusals import RefusalDetails


class BodegaError(Exception):
    http_status = 500
    status = "unknown"
    # Seconds a client should wait before trying again (sent as ``Retry-After``), when the
    # refusal is one that passes: a full queue (429), a component not answering yet (503).
    retry_after: float | None = None

    def __init__(self, message: str, *, status: str | None = None,
                 details: RefusalDetails | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.details = details  # what the caller may act on (``model/refusals.py``)

    def to_wire(self) -> dict[str, object]:
        """The error's JSON body (the Machines API's ``ErrorResponse``)."""
        body: dict[str, object] = {"error": self.message, "status": self.status}
        if self.details is not None:
            body["details"] = self.details.doc()
        return body


class BadRequest(BodegaError):
    http_status = 400
    status = "invalid_argument"


class Unauthorized(BodegaError):
    http_status = 401
    status = "unauthenticated"


class Forbidden(BodegaError):
    http_status = 403
    status = "permission_denied"


class NotFound(BodegaError):
    http_status = 404
    status = "not_found"


class Timeout(BodegaError):
    http_status = 408
    status = "deadline_exceeded"


class Gone(BodegaError):
    """What was asked for existed and is no longer kept (a change log's start moved past
    it): asking again the same way never works, starting afresh does."""

    http_status = 410
    status = "gone"


class Conflict(BodegaError):
    http_status = 409
    status = "failed_precondition"


class Misdirected(BodegaError):
    """Sent to a server that is not the one to decide it (a job's submit to a worker that
    is not the job's home); ``details`` say which is."""

    http_status = 421
    status = "misdirected"


class PreconditionFailed(BodegaError):
    http_status = 412
    status = "failed_precondition"


class PayloadTooLarge(BodegaError):
    """A request body over the size a service reads (see
    ``bodega.wire.transport.http.MAX_BODY``)."""

    http_status = 413
    status = "invalid_argument"


class TooManyRequests(BodegaError):
    """Refused for now, nothing recorded: the caller has to wait ``retry_after`` seconds
    (a caller failing too often: ``rate_limited``; a full queue: ``resource_exhausted``,
    with ``retry_after`` in its details too)."""

    http_status = 429
    status = "rate_limited"

    def __init__(self, message: str, *, retry_after: float = 1.0, status: str | None = None,
                 details: RefusalDetails | None = None) -> None:
        super().__init__(message, status=status, details=details)
        self.retry_after = retry_after


class Unprocessable(BodegaError):
    http_status = 422
    status = "invalid_argument"


class StorageFull(BodegaError):
    """The host's disk is full: nothing was recorded, so the request may be retried later."""

    http_status = 507
    status = "insufficient_storage"


class Unavailable(BodegaError):
    http_status = 503
    status = "unavailable"


class Unreachable(Unavailable):
    """No connection could be made: the server cannot have seen the request.

    ``url`` is where it was sent and ``reason`` a few words on why ("connection
    refused"), so a command line can word it for a person."""

    def __init__(self, message: str, *, url: str = "", reason: str = "",
                 status: str | None = None, details: RefusalDetails | None = None) -> None:
        super().__init__(message, status=status, details=details)
        self.url = url
        self.reason = reason


class Indeterminate(Unavailable):
    """The request went out but no answer came back: it may or may not have taken effect."""


class InsufficientCapacity(BodegaError):
    """Nothing in the asked region can take the machine right now."""

    http_status = 412
    status = "insufficient_capacity"


ERROR_CLASSES: dict[int, type[BodegaError]] = {
    cls.http_status: cls
    for cls in (BadRequest, Unauthorized, Forbidden, NotFound, Timeout, Conflict, Gone,
                PreconditionFailed, PayloadTooLarge, Unprocessable, Unavailable, TooManyRequests,
                Misdirected)
}


def from_wire(http_status: int, body: Any) -> BodegaError:
    """Rebuild an error a bodega service sent, so it can be raised again upstream."""
    from bodega.model.refusals import RetryLater, refusal_of  # pydantic: only when one comes

    message = "unknown error"
    status: str | None = None
    details = None
    if isinstance(body, dict):
        message = str(body.get("error", message))
        raw_status = body.get("status")
        status = str(raw_status) if raw_status is not None else None
        details = refusal_of(body.get("details"))
    cls = ERROR_CLASSES.get(http_status, BodegaError)
    if http_status == InsufficientCapacity.http_status and status == InsufficientCapacity.status:
        cls = InsufficientCapacity
    err = cls(message, status=status, details=details)
    err.http_status = http_status
    if isinstance(details, RetryLater):
        err.retry_after = details.retry_after
    return err


def validation_message(exc: ValidationError, where: str = "") -> str:
    """A body's validation errors in one line, each naming its field (under ``where``)."""
    parts = []
    for error in exc.errors()[:5]:
        path = [where] if where else []
        path += [str(p) for p in error.get("loc", ()) if p != "body"]
        parts.append(f"{'.'.join(path) or 'body'}: {error.get('msg', 'invalid')}")
    return "invalid_argument: " + "; ".join(parts)
