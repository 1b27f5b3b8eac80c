"""One readable line on stderr instead of a traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import typer

from bodega.model.errors import BodegaError, Unavailable

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 1) -> None:
    typer.secho(f"Error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def friendly(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Unavailable as err:
            if err.status == "indeterminate":  # the broker answered: it is a worker that did not
                fail(err.message)
            fail(f"{err.message} (is the cluster running? try `bodega up`)")
        except BodegaError as err:
            fail(err.message)
        except (ValueError, OSError) as err:
            fail(str(err))
        except KeyboardInterrupt:
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def in_flags(message: str, words: Mapping[str, str]) -> str:
    """``message`` with each API word in ``words`` (``force=true``) replaced by its flag."""
    for api_word, flag in words.items():
        message = message.replace(api_word, flag)
    return message


@contextmanager
def worded_in_flags(words: Mapping[str, str]) -> Iterator[None]:
    """Pass an API refusal on naming the command's flags, not the API's query parameters.

    The Machines API words its refusals for API clients (``stop it first or use
    force=true``, ``name its app with ?app=``), which is right there; a command passes
    them on with the flag that sets each (``--force``, ``-a APP``) instead.
    """
    try:
        yield
    except BodegaError as err:
        err.message = in_flags(err.message, words)
        err.args = (err.message,)
        raise
