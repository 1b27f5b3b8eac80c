"""A real registry (CNCF distribution) and small busybox images built offline with umoci."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from bodega.cli.commands.build import PushTarget, push_files
from tests.ports_kit import free_port as free_port

BUSYBOX = shutil.which("busybox") or "/bin/busybox"
TOOLS = ("docker-registry", "runc", "umoci", "skopeo")
needs_image_tools = pytest.mark.skipif(
    os.geteuid() != 0 or any(shutil.which(t) is None for t in TOOLS) or not os.path.exists(BUSYBOX),
    reason="needs root, docker-registry, runc, umoci, skopeo and busybox",
)


@contextlib.asynccontextmanager
async def registry(tmp: Path) -> AsyncIterator[str]:
    """A docker-registry on 127.0.0.1; yields its host:port."""
    port = free_port()
    config = tmp / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp / 'reg'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\nlog:\n  level: warn\n")
    log = (tmp / "registry.log").open("wb")
    process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log,
                               stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"http://127.0.0.1:{port}/v2/")).status_code == 200:
                        break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("registry did not start")
                await asyncio.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def cluster_auth(data_dir: Path, registry: str, scratch: Path) -> tuple[Path, Path]:
    """A CA directory and an auth file for the image registry of the ``bodega up`` in
    ``data_dir``: its CA (``ca.crt``) and its admin token (``api-token``), written as
    ``bodega build``'s push writes them, in ``scratch``."""
    scratch.mkdir(parents=True, exist_ok=True)
    token = (data_dir / "api-token").read_text().strip()
    files = push_files(PushTarget(registry, (data_dir / "ca.crt").read_text(), token),
                       scratch)
    assert files.auth is not None
    return files.certs, files.auth


def cluster_push(data_dir: Path, registry: str, scratch: Path) -> list[str]:
    """skopeo's flags to push to the image registry of the ``bodega up`` in ``data_dir``."""
    certs, auth = cluster_auth(data_dir, registry, scratch)
    return ["--dest-cert-dir", str(certs), "--dest-authfile", str(auth)]


def build_image(tmp: Path, host: str, name: str, *, page: str = "hello from an image\n",
                extra_mb: int = 0, user: str | None = None,
                cluster: Path | None = None,
                files: Callable[[Path], None] | None = None) -> str:
    """Build a busybox image that serves ``page`` with httpd on :8080 and push it; ``user``
    is the image's ``User`` (none: root); ``cluster``: the data dir of the ``bodega up``
    whose registry ``host`` is (HTTPS from its CA, a push with its admin token); ``files``
    writes more into the image's root, given its path."""
    work = tmp / f"build-{name.replace('/', '-').replace(':', '-')}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    layout, bundle = work / "layout", work / "bundle"

    def run(*argv: str) -> None:
        subprocess.run(argv, check=True, capture_output=True)

    run("umoci", "init", "--layout", str(layout))
    run("umoci", "new", "--image", f"{layout}:t")
    run("umoci", "unpack", "--image", f"{layout}:t", str(bundle))
    rootfs = bundle / "rootfs"
    for sub in ("bin", "www", "etc", "tmp"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy(BUSYBOX, rootfs / "bin" / "busybox")
    for tool in ("sh", "cat", "ls", "echo", "sleep", "httpd", "id", "hostname", "touch",
                 "readlink", "grep"):
        (rootfs / "bin" / tool).symlink_to("busybox")
    (rootfs / "www" / "index.html").write_text(page)
    (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/:/bin/sh\n")
    if files is not None:
        files(rootfs)
    if extra_mb:
        (rootfs / "padding").write_bytes(os.urandom(extra_mb << 20))
    run("umoci", "repack", "--image", f"{layout}:t", str(bundle))
    run("umoci", "config", "--image", f"{layout}:t", "--config.entrypoint", "/bin/httpd",
        "--config.cmd", "-f", "--config.cmd", "-p", "--config.cmd", "8080",
        "--config.cmd", "-h", "--config.cmd", "/www", "--config.env", "FROM_IMAGE=yes",
        "--config.workingdir", "/www", *(["--config.user", user] if user else []))
    reference = f"{host}/{name}"
    dest = (cluster_push(cluster, host, work / "push") if cluster is not None
            else ["--dest-tls-verify=false"])
    run("skopeo", "copy", *dest, f"oci:{layout}:t", f"docker://{reference}")
    return reference
