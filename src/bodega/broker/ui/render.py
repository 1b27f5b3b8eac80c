"""Templates to HTML: the Jinja2 environment, its filters, and the headers every page carries.

Pages are rendered whole on the server; live updates are the same templates'
fragments sent over the page's event stream. Every page forbids what it
does not need (``Content-Security-Policy``: scripts, styles, connections and
forms only from the broker itself; no framing), so a page can load no
script from anywhere else even if a template were wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.responses import HTMLResponse

from bodega.broker.ui.core.bars import BAR_WIDTH

STATIC = Path(__file__).parent / "static"

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def cpus(millicpus: int | float) -> str:
    """1250 -> "1.25" (cpus, from millicpus)."""
    return f"{millicpus / 1000:.2f}".rstrip("0").rstrip(".")


def size_mb(megabytes: int | float) -> str:
    if abs(megabytes) >= 1024:
        return f"{megabytes / 1024:.1f}".removesuffix(".0") + " GB"
    return f"{int(megabytes)} MB"


def percent(part: int | float, whole: int | float) -> str:
    return "0%" if whole <= 0 else f"{round(100 * part / whole)}%"


def seconds(value: float) -> str:
    return f"{value:.1f} s"


class Templates:
    def __init__(self) -> None:
        self.env = Environment(loader=PackageLoader("bodega.broker.ui", "templates"),
                               autoescape=select_autoescape(["html", "svg"]),
                               undefined=StrictUndefined, trim_blocks=True,
                               lstrip_blocks=True)
        self.env.filters.update(cpus=cpus, size_mb=size_mb, seconds=seconds)
        self.env.globals.update(percent=percent, BAR_WIDTH=BAR_WIDTH)

    def fragment(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context)

    def page(self, name: str, code: int = 200, headers: dict[str, str] | None = None,
             **context: Any) -> HTMLResponse:
        return html(self.fragment(name, **context), code, headers)


def html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})
