"""``bodega build PATH -t NAME``: build an image with buildah and push it to the cluster's registry.

The way ``fly deploy --local-only`` builds: a daemonless builder on this
host (Debian's ``buildah``), then a push. A name without a registry host is
pushed to the registry of the cluster the command talks to (``--context``,
``--api-url``...): the context's ``registry`` if it has one, else the one the
cluster names itself (``GET /v1/cluster``; ``bodega up`` tells its broker),
so ``bodega build . -t web:v1`` prints e.g. ``127.0.0.1:41234/web:v1``, the
reference to give a machine as ``config.image``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.errors import friendly
from bodega.cli.session import ApiUrl, ContextName, Token, call_target, target
from bodega.cli.target import Target
from bodega.model.errors import NotFound
from bodega.model.machine import names_registry
from bodega.worker.images.reference import parse_reference

LOOPBACK = ("127.0.0.1", "localhost", "::1")

Registry = Annotated[str | None, typer.Option(
    help="Registry host:port to push to (default: the context's, else the one the cluster "
         "names)", show_default=False)]
DataDir = Annotated[str | None, typer.Option(
    envvar="BODEGA_DATA_DIR", show_default=False,
    help="A `bodega up` data dir whose cluster is used when no --api-url, --context or "
         "current context chooses one (default: .bodega)")]


def push_registry(given: str | None, cluster: Target) -> str:
    """Where images go: ``--registry``, else the context's registry, else the cluster's own."""
    if given:
        return given
    if cluster.context is not None and cluster.context.registry:
        return cluster.context.registry
    try:
        info = call_target(cluster, lambda client: client.cluster_info())
    except NotFound:
        raise ValueError(f"the bodega API at {cluster.api_url} does not say where its image "
                         "registry is (no GET /v1/cluster): give --registry host:port") from None
    if info.image_registry is None:
        raise ValueError(f"the cluster at {cluster.api_url} runs no image registry: give "
                         "--registry host:port")
    return info.image_registry


def cluster_registry(api_url: str | None, token: str | None, context: str | None,
                     data_dir: str | None) -> str:
    """The registry of the cluster the command talks to; when there is none to talk to,
    the one-line error also names ``--registry``, which needs no cluster."""
    try:
        cluster = target(api_url, token, context, data_dir)
    except ValueError as err:
        raise ValueError(f"{err}; or push elsewhere with --registry host:port") from None
    return push_registry(None, cluster)


def build_commands(context: Path, reference: str, dockerfile: Path | None,
                   digest_file: Path) -> list[list[str]]:
    """buildah's build, then its push (plain HTTP to a loopback registry).

    The push writes the digest of the manifest it pushed to ``digest_file``."""
    registry = parse_reference(reference).registry
    tls = "false" if registry.rsplit(":", 1)[0] in LOOPBACK else "true"
    build = ["buildah", "bud", "--quiet", "-t", reference]
    if dockerfile is not None:
        build += ["-f", str(dockerfile)]
    return [[*build, str(context)],
            ["buildah", "push", "--quiet", f"--tls-verify={tls}", "--digestfile",
             str(digest_file), reference, f"docker://{reference}"]]


@friendly
def build(
    path: Annotated[Path, typer.Argument(help="Build context (holds the Dockerfile)")],
    tag: Annotated[str, typer.Option("--tag", "-t", help="Image name, e.g. web:v1")],
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Dockerfile")] = None,
    registry: Registry = None, data_dir: DataDir = None,
    api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
) -> None:
    """Build an image from a Dockerfile with buildah and push it; prints its reference."""
    if not path.is_dir():
        raise ValueError(f"{path} is not a directory")
    if not names_registry(tag):
        tag = f"{registry or cluster_registry(api_url, token, context, data_dir)}/{tag}"
    digest = build_and_push(path, tag, file)
    typer.echo(tag)
    typer.echo(f"pushed {digest} (pin it as {tag}@{digest})", err=True)


def build_and_push(context: Path, reference: str, dockerfile: Path | None) -> str:
    """Build ``context`` as ``reference`` and push it: the pushed manifest's digest.

    ValueError with buildah's last line when a step fails."""
    if shutil.which("buildah") is None:
        raise ValueError("buildah is not installed: apt-get install -y buildah")
    parse_reference(reference)  # a bad name is refused before anything is built
    with tempfile.TemporaryDirectory(prefix="bodega-build-") as scratch:
        digest_file = Path(scratch) / "digest"
        for argv in build_commands(context, reference, dockerfile, digest_file):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                lines = (done.stderr or done.stdout).strip().splitlines()
                raise ValueError(f"{argv[0]} {argv[1]} failed: {lines[-1] if lines else '?'}")
        return digest_file.read_text().strip()
