"""``bodega build PATH -t NAME``: build an image with buildah and push it to the cluster's registry.

The way ``fly deploy --local-only`` builds: a daemonless builder on this
host (Debian's ``buildah``), then a push. A name without a registry host is
pushed to the registry ``bodega up`` runs (read from its ``cluster.json``),
so ``bodega build . -t web:v1`` prints e.g. ``127.0.0.1:41234/web:v1``, the
reference to give a machine as ``config.image``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.errors import friendly
from bodega.worker.images.reference import names_registry, parse_reference

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def cluster_registry(data_dir: Path) -> str:
    """The host:port of the registry a running ``bodega up`` serves, from its cluster.json."""
    try:
        state = json.loads((data_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        raise ValueError(f"no running cluster in {data_dir}: start `bodega up` or give "
                         "--registry host:port") from None
    for component in state.get("components", []):
        if component.get("role") == "registry" and component.get("registry"):
            return str(component["registry"])
    raise ValueError(f"the cluster in {data_dir} runs no image registry: give "
                     "--registry host:port")


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
    registry: Annotated[str | None, typer.Option(
        help="Registry host:port [default: the one `bodega up` runs]")] = None,
    data_dir: Annotated[Path, typer.Option(help="The local cluster's data dir")]
    = Path(".bodega"),
) -> None:
    """Build an image from a Dockerfile with buildah and push it; prints its reference."""
    if not path.is_dir():
        raise ValueError(f"{path} is not a directory")
    reference = tag if names_registry(tag) else \
        f"{registry or cluster_registry(data_dir.resolve())}/{tag}"
    digest = build_and_push(path, reference, file)
    typer.echo(reference)
    typer.echo(f"pushed {digest} (pin it as {reference}@{digest})", err=True)


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
