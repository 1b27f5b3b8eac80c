"""The flags every daemon shares, declared once: each launcher (worker, broker, proxy,
registry agent, image registry) names these types instead of spelling the flag again.

Internal links: ``--tls-dir`` (default ``<data-dir>/tls``, checked by
``internal_links.tls_dir_for``) and the hidden ``--internal-tls off``. The cluster's keys:
``--secrets-key``, ``--certs-key``. Gossip: ``--gossip-listen``, ``--join`` and
``--gossip-keyring``, a file (``bodega up`` makes ``<data-dir>/gossip-keyring`` and hands
every component its path; a host joining a cluster writes the keyring it is given to its
own), or, for a daemon with no file of its own, the keyring's JSON in
``BODEGA_GOSSIP_KEYRING``: keys never go on a command line. ``--registry-agent``: read the
host's agent's replica instead of replicating alone. And how it runs: ``--ready-file``,
``--log-level``, the hidden ``--exit-with-parent``.

What differs by daemon (its data dir, name, listeners, region) stays with its launcher:
their help and defaults say what that daemon does with them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from bodega.registry.sealing.keyfile import ENV_FILE, ENV_JSON, KeyringSource, load

GossipKeyring = Annotated[Path | None, typer.Option(
    "--gossip-keyring", envvar=ENV_FILE, show_default=False,
    help=f"The cluster's gossip keyring file (made by `bodega up`); rewritten when the cluster "
         f"rotates its key. Without it, the keyring's JSON in {ENV_JSON}")]


RegistryAgentOption = Annotated[Path | None, typer.Option(
    "--registry-agent",
    help="The data dir of this host's registry agent (bodega agent): read its replica and "
         "hand it this process's rows, instead of replicating on its own")]

TlsDirOption = Annotated[Path | None, typer.Option(
    help="Key, certificate and cluster CA for mutual TLS on internal links "
         "(default: <data-dir>/tls; bodega up makes them)")]
InternalTlsOption = Annotated[str, typer.Option(
    hidden=True, help="off: plain HTTP, unauthenticated, on loopback only (for measuring "
                      "what TLS costs)")]
SecretsKeyOption = Annotated[str | None, typer.Option(
    envvar="BODEGA_SECRETS_KEY", show_default=False,
    help="The cluster's secrets key: seals and opens app secrets")]
CertsKeyOption = Annotated[str | None, typer.Option(
    envvar="BODEGA_CERTS_KEY", show_default=False,
    help="The cluster's certificates key: seals and opens the edge's certificate keys")]

GossipListenOption = Annotated[str | None, typer.Option(
    help="host:port for registry gossip (UDP) (default: any port on a host it listens on)")]
JoinOption = Annotated[str | None, typer.Option(
    help="Gossip host:port of members to join through, comma-separated")]

ReadyFileOption = Annotated[Path | None, typer.Option(
    help="Write where it serves (url, gossip) and its pid here when ready")]
LogLevelOption = Annotated[str, typer.Option(help="debug, info, warning")]
# Set by a parent that starts it (bodega up, bodega join, a test): it stops when that goes.
ExitWithParentOption = Annotated[bool, typer.Option(hidden=True)]


def gossip_keyring(path: Path | None) -> KeyringSource:
    return load(path, os.environ.get(ENV_JSON))
