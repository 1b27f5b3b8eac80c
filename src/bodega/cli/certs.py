"""``bodega certs``: the edge's certificates for an app's hostnames, as ``fly certs``.

``add`` has the cluster CA issue one (trust the CA with ``curl --cacert
<data-dir>/ca.crt``, the file ``bodega up`` writes); ``import`` brings a PEM
chain and key. Either way the key is sealed at rest and every proxy serves
the certificate within a gossip round, swapped in with no reload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.errors import friendly
from bodega.cli.session import ApiUrl, App, ContextName, Json, Token, call, show_json, table
from bodega.wire.certificates import CertificateList, CertificateView

certs = typer.Typer(help="Manage the TLS certificates the proxies serve for an app's hostnames.",
                    no_args_is_help=True)

Hostname = Annotated[str, typer.Argument(help="e.g. www.example.com or '*.hello.localhost'")]


def _path(hostname: str) -> str:
    return f"/v1/apps/{{app}}/certificates/{hostname}"


def _show(view: CertificateView, verb: str) -> None:
    typer.echo(f"{verb} {view.hostname} for {view.app}: {view.source}, issued by "
               f"{view.issuer}, valid until {view.not_after:%Y-%m-%d %H:%M}Z "
               f"({view.fingerprint[:23]}...)")


def _add(app: str, body: dict[str, str], api_url: str | None, token: str | None,
         context: str | None, json: bool) -> CertificateView:
    view: CertificateView = call(api_url, token, lambda c: c.answer(
        CertificateView, "POST", f"/v1/apps/{app}/certificates", json=body), context=context)
    if json:
        show_json(view)
    return view


@certs.command("add")
@friendly
def add(hostname: Hostname, app: App, api_url: ApiUrl = None, token: Token = None,
        context: ContextName = None, json: Json = False) -> None:
    """Have the cluster CA issue a certificate for HOSTNAME (again: renew it)."""
    view = _add(app, {"hostname": hostname}, api_url, token, context, json)
    if not json:
        _show(view, "Issued")
        typer.echo("Clients trust it through the cluster CA: curl --cacert <data-dir>/ca.crt "
                   f"https://{view.hostname.replace('*', 'any')}:<proxy TLS port>/")


@certs.command("import")
@friendly
def import_cert(hostname: Hostname, app: App,
                cert: Annotated[Path, typer.Option(help="PEM chain, the leaf first")],
                key: Annotated[Path, typer.Option(help="PEM private key (unencrypted)")],
                api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
                json: Json = False) -> None:
    """Import a certificate and key for HOSTNAME (checked to be a pair covering it)."""
    body = {"hostname": hostname, "certificate": _read(cert, "--cert"),
            "private_key": _read(key, "--key")}
    view = _add(app, body, api_url, token, context, json)
    if not json:
        _show(view, "Imported")


def _read(path: Path, flag: str) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{flag} {path}: {exc.strerror if isinstance(exc, OSError) else exc}"
                         ) from None


@certs.command("list")
@friendly
def list_certs(app: App, api_url: ApiUrl = None, token: Token = None,
               context: ContextName = None, json: Json = False) -> None:
    """List an app's certificates."""
    listed: CertificateList = call(api_url, token, lambda c: c.answer(
        CertificateList, "GET", f"/v1/apps/{app}/certificates"), context=context)
    if json:
        show_json(listed)
        return
    table(["HOSTNAME", "SOURCE", "EXPIRES", "ISSUER"],
          [(v.hostname, v.source, f"{v.not_after:%Y-%m-%d}", v.issuer)
           for v in listed.certificates])


@certs.command("show")
@friendly
def show(hostname: Hostname, app: App, api_url: ApiUrl = None, token: Token = None,
         context: ContextName = None, json: Json = False) -> None:
    """Show one certificate: what it covers, who issued it, when it expires."""
    view: CertificateView = call(api_url, token, lambda c: c.answer(
        CertificateView, "GET", _path(hostname).format(app=app)), context=context)
    if json:
        show_json(view)
        return
    for label, value in (("Hostname", view.hostname), ("App", view.app),
                         ("Source", view.source), ("Covers", ", ".join(view.hostnames)),
                         ("Issuer", view.issuer), ("Expires", f"{view.not_after:%Y-%m-%d %H:%M}Z"),
                         ("Fingerprint", view.fingerprint), ("Updated", view.updated_at)):
        typer.echo(f"{label + ':':<13}{value}")


@certs.command("remove")
@friendly
def remove(hostname: Hostname, app: App, api_url: ApiUrl = None, token: Token = None,
           context: ContextName = None) -> None:
    """Remove a certificate: the proxies stop serving it (no reload)."""
    call(api_url, token, lambda c: c.request("DELETE", _path(hostname).format(app=app)),
         context=context)
    typer.echo(f"Removed the certificate for {hostname} from {app}")
