"""``bodega image-registry``: the cluster's OCI registry as a component (``bodega up``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.daemons.options import ExitWithParentOption
from bodega.cli.session.errors import friendly
from bodega.cluster.image_registry import RegistryTls, run_registry
from bodega.model.duration import parse_duration
from bodega.runtime import hostinfo
from bodega.runtime.tls.core import pki


@friendly
def image_registry(
    data_dir: Annotated[Path, typer.Option(help="Where the registry stores images")],
    listen: Annotated[str, typer.Option(help="host:port to serve on")] = "127.0.0.1:5050",
    ready_file: Annotated[Path | None, typer.Option(help="Written once it answers")] = None,
    ca_dir: Annotated[Path | None, typer.Option(
        help="The cluster CA (ca.pem, ca-key.pem): serve HTTPS with a certificate it issues "
             "here, pushes only with an admin token, pulls with that or a worker's "
             "certificate. Without it: plain HTTP, open (--internal-tls off)")] = None,
    cert_validity: Annotated[str, typer.Option(
        help="Life of the certificate it issues itself (renewed at two thirds)")] = "8760h",
    token_sha256: Annotated[list[str] | None, typer.Option(
        "--token-sha256", envvar="BODEGA_API_TOKEN_SHA256", show_default=False,
        help="SHA-256 (hex) of an admin API token that may push (repeatable); needed with "
             "--ca-dir. The registry never holds the token itself")] = None,
    exit_with_parent: ExitWithParentOption = False,
) -> None:
    """Run docker-registry (CNCF distribution) with its storage under DATA_DIR."""
    host, port = hostinfo.split_host_port(listen, 5050)
    tls = None
    if ca_dir is not None:
        if not token_sha256:
            raise ValueError("--ca-dir needs the SHA-256 of the admin token that may push "
                             "(--token-sha256, or BODEGA_API_TOKEN_SHA256)")
        lifetime = parse_duration(cert_validity, 0.0)
        if lifetime < pki.MIN_LIFETIME:
            raise ValueError(f"--cert-validity must be at least {pki.MIN_LIFETIME:g}s")
        tls = RegistryTls(ca_dir.resolve(), lifetime,
                          tuple(token_digest(d) for d in token_sha256))
    raise typer.Exit(asyncio.run(run_registry(data_dir.resolve(), host, port, ready_file,
                                               exit_with_parent, tls)))


def token_digest(text: str) -> bytes:
    try:
        digest = bytes.fromhex(text.strip())
    except ValueError:
        digest = b""
    if len(digest) != 32:
        raise ValueError("--token-sha256 is a SHA-256 in hex (64 hex digits)")
    return digest
