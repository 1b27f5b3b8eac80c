"""``bodega certs``: the edge's certificates for an app's hostnames, as ``fly certs``.

``add`` has the cluster CA issue one (trust the CA with ``curl --cacert
<data-dir>/ca.crt``, the file ``bodega up`` writes); ``import`` brings a PEM
chain and key. Either way the key is sealed at rest and every proxy serves
the certificate within a gossip round, swapped in with no reload.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json, table
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly
from bodega.wire.public.fly_certificates import (
    SOURCE_LABELS,
    CertificateDetail,
    CertificateEntry,
    CertificateListing,
)

if TYPE_CHECKING:
    from bodega.wire.public.machines_client import MachinesClient

certs = typer.Typer(help="Manage the TLS certificates the proxies serve for an app's hostnames.",
                    no_args_is_help=True)

Hostname = Annotated[str, typer.Argument(help="e.g. www.example.com or '*.hello.localhost'")]
PAGE = 500


def _path(hostname: str) -> str:
    return f"/v1/apps/{{app}}/certificates/{hostname}"


def _expires(entry: CertificateEntry) -> str:
    return f"{datetime.datetime.fromisoformat(entry.expires_at):%Y-%m-%d %H:%M}Z"


def _show(detail: CertificateDetail, app: str, verb: str) -> None:
    entry = detail.certificates[0]
    typer.echo(f"{verb} {detail.hostname} for {app}: {SOURCE_LABELS[entry.source]}, issued by "
               f"{entry.issuer}, valid until {_expires(entry)} ({entry.fingerprint[:23]}...)")


def _add(app: str, path: str, body: dict[str, str], api_url: str | None, token: str | None,
         context: str | None, json: bool) -> CertificateDetail:
    detail: CertificateDetail = call(api_url, token, lambda c: c.answer(
        CertificateDetail, "POST", f"/v1/apps/{app}/certificates{path}", json=body),
        context=context)
    if json:
        show_json(detail)
    return detail


@certs.command("add")
@friendly
def add(hostname: Hostname, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
        api_url: ApiUrl = None, token: Token = None,
        context: ContextName = None, json: Json = False) -> None:
    """Have the cluster CA issue a certificate for HOSTNAME (again: renew it)."""
    app = app_name(app, config)
    detail = _add(app, "", {"hostname": hostname}, api_url, token, context, json)
    if not json:
        _show(detail, app, "Issued")
        typer.echo("Clients trust it through the cluster CA: curl --cacert <data-dir>/ca.crt "
                   f"https://{detail.hostname.replace('*', 'any')}:<proxy TLS port>/")


@certs.command("import")
@friendly
def import_cert(hostname: Hostname,
                cert: Annotated[Path, typer.Option(help="PEM chain, the leaf first")],
                key: Annotated[Path, typer.Option(help="PEM private key (unencrypted)")],
                app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
                json: Json = False) -> None:
    """Import a certificate and key for HOSTNAME (checked to be a pair covering it)."""
    app = app_name(app, config)
    body = {"hostname": hostname, "fullchain": _read(cert, "--cert"),
            "private_key": _read(key, "--key")}
    detail = _add(app, "/custom", body, api_url, token, context, json)
    if not json:
        _show(detail, app, "Imported")


def _read(path: Path, flag: str) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{flag} {path}: {exc.strerror if isinstance(exc, OSError) else exc}"
                         ) from None


@certs.command("list")
@friendly
def list_certs(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
               api_url: ApiUrl = None, token: Token = None,
               context: ContextName = None, json: Json = False) -> None:
    """List an app's certificates."""
    app = app_name(app, config)

    async def every_page(client: MachinesClient) -> CertificateListing:
        listed = CertificateListing(certificates=[], total_count=0)
        cursor: str | None = ""
        while cursor is not None:  # each page after the last hostname of the one before
            page = await client.answer(
                CertificateListing, "GET", f"/v1/apps/{app}/certificates",
                params={"limit": str(PAGE), **({"cursor": cursor} if cursor else {})})
            listed.certificates.extend(page.certificates)
            listed.total_count = page.total_count
            cursor = page.next_cursor
        return listed

    listed = call(api_url, token, every_page, context=context)
    if json:
        show_json(listed)
        return
    table(["HOSTNAME", "SOURCE", "STATUS", "UPDATED"],
          [(v.hostname, SOURCE_LABELS["fly" if v.has_fly_certificate else "custom"], v.status,
            v.updated_at) for v in listed.certificates])


@certs.command("show")
@friendly
def show(hostname: Hostname, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
         api_url: ApiUrl = None, token: Token = None,
         context: ContextName = None, json: Json = False) -> None:
    """Show one certificate: what it covers, who issued it, when it expires."""
    app = app_name(app, config)
    detail: CertificateDetail = call(api_url, token, lambda c: c.answer(
        CertificateDetail, "GET", _path(hostname).format(app=app)), context=context)
    if json:
        show_json(detail)
        return
    entry = detail.certificates[0]
    for label, value in (("Hostname", detail.hostname), ("App", app),
                         ("Status", detail.status), ("Source", SOURCE_LABELS[entry.source]),
                         ("Covers", ", ".join(entry.hostnames)), ("Issuer", entry.issuer),
                         ("Expires", _expires(entry)), ("Fingerprint", entry.fingerprint),
                         ("Updated", entry.created_at)):
        typer.echo(f"{label + ':':<13}{value}")


@certs.command("remove")
@friendly
def remove(hostname: Hostname, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
           api_url: ApiUrl = None, token: Token = None,
           context: ContextName = None) -> None:
    """Remove a certificate: the proxies stop serving it (no reload)."""
    app = app_name(app, config)
    call(api_url, token, lambda c: c.request("DELETE", _path(hostname).format(app=app)),
         context=context)
    typer.echo(f"Removed the certificate for {hostname} from {app}")
