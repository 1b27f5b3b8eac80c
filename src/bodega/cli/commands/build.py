"""``bodega build PATH -t NAME``: build an image with buildah and push it to the cluster's registry.

The way ``fly deploy --local-only`` builds: a daemonless builder on this
host (Debian's ``buildah``), then a push. A name without a registry host is
pushed to the registry of the cluster the command talks to (``--context``,
``--api-url``...): the context's ``registry`` if it has one, else the one the
cluster names itself (``GET /v1/cluster``; ``bodega up`` tells its broker),
so ``bodega build . -t web:v1`` prints e.g. ``127.0.0.1:41234/web:v1``, the
reference to give a machine as ``config.image``.

The cluster's own registry serves HTTPS with a certificate from the cluster
CA and takes pushes with an admin token (docs/security.md): the push checks
it against the CA the cluster names with it, and gives it the command's token
as its password, through a CA directory and an auth file of the push's own
(0700, removed after), never on a command line. A registry named by hand
(``--registry``, a context's, or in the name) gets neither: buildah's own
trust and credentials apply, plain HTTP to loopback.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Token, call_target, target, token_of
from bodega.cli.session.core.target import Target
from bodega.cli.session.errors import friendly
from bodega.model.errors import NotFound
from bodega.model.machine import names_registry
from bodega.worker.images.core.reference import parse_reference

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# What buildah says when a registry refused its credentials (containers/image's words).
UNAUTHORIZED = re.compile(r"unauthorized|authentication required", re.IGNORECASE)

Registry = Annotated[str | None, typer.Option(
    help="Registry host:port to push to (default: the context's, else the one the cluster "
         "names)", show_default=False)]
DataDir = Annotated[str | None, typer.Option(
    envvar="BODEGA_DATA_DIR", show_default=False,
    help="A `bodega up` data dir whose cluster is used when no --api-url, --context or "
         "current context chooses one (default: .bodega)")]


@dataclass(frozen=True)
class PushTarget:
    """Where images go, and for the cluster's own registry how: the CA (PEM) its
    certificate is checked by, and the token it is given (``whose``: where that token
    came from, for a refusal's line). None for a registry named by hand. ``mirrors``: the
    cluster's other live registries (every server host runs one), pushed to after
    ``registry`` with the same CA and token, so the image is on every one of them."""

    registry: str
    ca: str | None = None
    token: str | None = None
    whose: str = ""
    mirrors: tuple[str, ...] = ()

    @property
    def registries(self) -> tuple[str, ...]:
        return (self.registry, *(m for m in self.mirrors if m != self.registry))


def push_target(given: str | None, cluster: Target) -> PushTarget:
    """``--registry``, else the context's registry, else the cluster's own (with its CA and
    the command's token)."""
    if given:
        return PushTarget(given)
    if cluster.context is not None and cluster.context.registry:
        return PushTarget(cluster.context.registry)
    try:
        info = call_target(cluster, lambda client: client.cluster_info())
    except NotFound:
        raise ValueError(f"the bodega API at {cluster.api_url} does not say where its image "
                         "registry is (no GET /v1/cluster): give --registry host:port") from None
    if info.image_registry is None:
        raise ValueError(f"the cluster at {cluster.api_url} runs no image registry: give "
                         "--registry host:port")
    return PushTarget(info.image_registry, info.image_registry_ca, token_of(cluster),
                      cluster.origin, tuple(r for r in info.image_registries
                                            if r != info.image_registry))


def cluster_push(api_url: str | None, token: str | None, context: str | None,
                 data_dir: str | None) -> PushTarget:
    """The registry of the cluster the command talks to; when there is none to talk to,
    the one-line error also names ``--registry``, which needs no cluster."""
    try:
        cluster = target(api_url, token, context, data_dir)
    except ValueError as err:
        raise ValueError(f"{err}; or push elsewhere with --registry host:port") from None
    return push_target(None, cluster)


def auth_file(registry: str, token: str, *more: str) -> str:
    """buildah's auth file (containers-auth.json) giving ``registry`` (and ``more``) the
    token as the password; the user name is not looked at."""
    basic = base64.b64encode(f"bodega:{token}".encode()).decode()
    return json.dumps({"auths": {r: {"auth": basic} for r in (registry, *more)}})


@dataclass(frozen=True)
class PushFiles:
    """What a push to the cluster's registry is given, in files of its own: a CA directory
    (``ca.crt``, as containers/image reads one) and an auth file with the token, if any."""

    certs: Path
    auth: Path | None


def push_files(push: PushTarget, scratch: Path) -> PushFiles:
    """Write ``push``'s CA and token for a push to ``push.registry`` in ``scratch`` (the
    auth file private: it holds the token)."""
    assert push.ca is not None
    certs = scratch / "certs"
    certs.mkdir(mode=0o700)
    (certs / "ca.crt").write_text(push.ca)  # containers/image takes *.crt as CAs
    if not push.token:
        return PushFiles(certs, None)
    auth = scratch / "auth.json"
    descriptor = os.open(auth, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(auth_file(push.registry, push.token, *push.registries[1:]))
    return PushFiles(certs, auth)


def push_options(push: PushTarget, reference: str, scratch: Path) -> list[str]:
    """buildah push's flags for ``reference``: with the cluster's CA, TLS checked against it
    and the token in an auth file (both written in ``scratch``); else plain HTTP to a
    loopback registry, TLS checked against the system's CAs to any other."""
    registry = parse_reference(reference).registry
    if push.ca is None or registry not in push.registries:
        plain = registry.rsplit(":", 1)[0] in LOOPBACK
        return [f"--tls-verify={'false' if plain else 'true'}"]
    files = push_files(push, scratch)
    return ["--tls-verify=true", "--cert-dir", str(files.certs),
            *(["--authfile", str(files.auth)] if files.auth is not None else [])]


def build_commands(context: Path, reference: str, dockerfile: Path | None,
                   digest_file: Path, push: list[str],
                   options: Sequence[str] = ()) -> list[list[str]]:
    """buildah's build with ``options`` (``ImageBuild.options``), then its push with
    ``push``'s flags (``push_options``).

    The push writes the digest of the manifest it pushed to ``digest_file``."""
    build = ["buildah", "bud", "--quiet", *options, "-t", reference]
    if dockerfile is not None:
        build += ["-f", str(dockerfile)]
    return [[*build, str(context)], push_command(reference, reference, push, digest_file)]


def push_command(reference: str, destination: str, push: list[str],
                 digest_file: Path) -> list[str]:
    """buildah's push of the built ``reference`` to ``destination`` (the same name, or
    the name on another of the cluster's registries)."""
    return ["buildah", "push", "--quiet", *push, "--digestfile", str(digest_file), reference,
            f"docker://{destination}"]


def on_registry(reference: str, registry: str) -> str:
    """``reference`` with its registry host swapped for ``registry``."""
    return f"{registry}/{reference.partition('/')[2]}"


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
    if names_registry(tag):
        push = PushTarget(parse_reference(tag).registry)
    else:
        push = PushTarget(registry) if registry else cluster_push(api_url, token, context,
                                                                  data_dir)
        tag = f"{push.registry}/{tag}"
    digest = build_and_push(path, tag, file, push)
    typer.echo(tag)
    typer.echo(f"pushed {digest} (pin it as {tag}@{digest})", err=True)


def build_and_push(context: Path, reference: str, dockerfile: Path | None,
                   push: PushTarget, options: Sequence[str] = ()) -> str:
    """Build ``context`` as ``reference`` and push it as ``push`` says: the pushed
    manifest's digest.

    ValueError with buildah's last line when a step fails."""
    if shutil.which("buildah") is None:
        raise ValueError("buildah is not installed: apt-get install -y buildah")
    parse_reference(reference)  # a bad name is refused before anything is built
    with tempfile.TemporaryDirectory(prefix="bodega-build-") as scratch:
        digest_file = Path(scratch) / "digest"
        pushing = push_options(push, reference, Path(scratch))
        build, first = build_commands(context, reference, dockerfile, digest_file, pushing,
                                      options)
        _run(build, push)
        named = parse_reference(reference).registry
        if named not in push.registries:  # a registry named by hand: that one only
            _run(first, push)
            return digest_file.read_text().strip()
        return _push_to_all(reference, push, pushing, Path(scratch))


def _push_to_all(reference: str, push: PushTarget, pushing: list[str], scratch: Path) -> str:
    """Push the built ``reference`` to each of the cluster's registries in turn: the digest
    of the first that took it. One that fails is said and passed over (its host may be
    lost), unless it refused the token; none taking it is the push's failure."""
    digests: list[str] = []
    failures: list[str] = []
    for index, registry in enumerate(push.registries):
        digest_file = scratch / f"digest-{index}"
        argv = push_command(reference, on_registry(reference, registry), pushing, digest_file)
        try:
            _run(argv, push, registry)
        except PushFailed as exc:
            failures.append(str(exc))
            if len(push.registries) > 1:
                typer.echo(f"warning: {exc}; pushing to the cluster's other registries",
                           err=True)
            continue
        digests.append(digest_file.read_text().strip())
    if not digests:
        raise ValueError("; ".join(failures))
    if len(set(digests)) > 1:
        typer.echo(f"warning: the cluster's registries took {reference} as different "
                   f"manifests ({', '.join(sorted(set(digests)))}): a worker pulls the "
                   "first's", err=True)
    return digests[0]


class PushFailed(ValueError):
    """A push to one registry failed (not refused): another may take it."""


def _run(argv: list[str], push: PushTarget, registry: str | None = None) -> None:
    """Run a buildah step; ValueError with its last line (PushFailed for a push that was
    not refused)."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return
    lines = (done.stderr or done.stdout).strip().splitlines()
    if argv[1] == "push" and push.token and UNAUTHORIZED.search(done.stderr):
        raise ValueError(f"the cluster's registry at {registry or push.registry} refused "
                         "the push: it takes pushes with an admin token, and the token from "
                         f"{push.whose} is not one")
    failed = f"{argv[0]} {argv[1]} failed: {lines[-1] if lines else '?'}"
    if argv[1] == "push":
        raise PushFailed(f"{failed} ({registry or push.registry})")
    raise ValueError(failed)
