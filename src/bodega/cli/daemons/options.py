"""``--gossip-keyring``: where a daemon (worker, broker, proxy) gets its gossip keys.

A file (``bodega up`` makes ``<data-dir>/gossip-keyring`` and hands every
component its path; a host joining a cluster writes the keyring it is given
to its own), or, for a daemon with no file of its own, the keyring's JSON in
``BODEGA_GOSSIP_KEYRING``. Keys never go on a command line.
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


def gossip_keyring(path: Path | None) -> KeyringSource:
    return load(path, os.environ.get(ENV_JSON))
