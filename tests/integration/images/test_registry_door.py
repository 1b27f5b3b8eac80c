"""The cluster's image registry behind its door (`bodega image-registry --ca-dir`), for real:
docker-registry on its Unix socket, HTTPS from the cluster CA in front. Plain HTTP gets no
answer; a push needs an admin token (buildah's, through `bodega build`'s push); a worker
pulls with its certificate and nothing else; its certificate is renewed with no restart."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from bodega.cli.commands.build import PushTarget, build_and_push
from bodega.runtime.tls.files import TlsDir
from bodega.worker.images import ImageStore, Puller, RegistryClient, RegistryError, RegistryTrust
from tests.poll_kit import until_sync
from tests.tls_kit import ClusterCa

from .image_kit import BUSYBOX, free_port, needs_image_tools

pytestmark = needs_image_tools
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "image-app"
TOKEN = "door-admin-token"
needs_buildah = pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah")


@dataclass
class Door:
    address: str  # host:port
    ca: ClusterCa
    process: subprocess.Popen[bytes]
    data: Path

    @property
    def url(self) -> str:
        return f"https://{self.address}"

    def worker(self, name: str = "w1") -> Path:
        """A worker's TLS directory, its certificate from the cluster CA."""
        return self.ca.issue(self.data.parent / f"worker-{name}", "worker", name)

    def puller(self, store: Path, identity: Path | None) -> Puller:
        trust = RegistryTrust(self.ca.ca_pem, identity)
        return Puller(ImageStore(store), RegistryClient(trusted={self.address: trust}))


def start_front(tmp: Path, port: int, validity: str) -> subprocess.Popen[bytes]:
    """``bodega image-registry`` on ``tmp/images`` with the CA in ``tmp/pki``, once ready."""
    ready = tmp / "ready.json"
    ready.unlink(missing_ok=True)
    with (tmp / "registry.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bodega", "image-registry", "--data-dir",
             str(tmp / "images"), "--listen", f"127.0.0.1:{port}", "--ca-dir",
             str(tmp / "pki" / "ca"), "--cert-validity", validity, "--ready-file", str(ready)],
            stdout=log, stderr=log, env={**os.environ, "BODEGA_API_TOKEN_SHA256": hashlib.sha256(
                TOKEN.encode()).hexdigest()})
    until_sync(lambda: ready.exists() or process.poll() is not None, "the registry ready",
               timeout=60, every=0.05)
    assert process.poll() is None, (tmp / "registry.log").read_text()
    return process


@contextlib.contextmanager
def door(tmp: Path, validity: str = "1h") -> Iterator[Door]:
    ca = ClusterCa.make(tmp / "pki", cluster="doorcluster")
    port = free_port()
    handle = Door(f"127.0.0.1:{port}", ca, start_front(tmp, port, validity), tmp / "images")
    try:
        yield handle
    finally:
        handle.process.terminate()
        handle.process.wait(30)


def registries_serving(data: Path) -> list[int]:
    """The docker-registry processes whose configuration is the one in ``data``."""
    config = str(data / "registry.yml").encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if Path(argv[0].decode()).name == "docker-registry" and config in argv:
                    found.append(int(proc.name))
    return sorted(found)


def children(pid: int) -> list[int]:
    return sorted(int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                  for child in (task / "children").read_text().split())


def served_certificate(address: str, ca_pem: str) -> x509.Certificate:
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cadata=ca_pem)
    with socket.create_connection((host, int(port))) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def app_context(tmp: Path) -> Path:
    context = tmp / "app"
    shutil.copytree(EXAMPLE, context)
    shutil.copy(BUSYBOX, context / "busybox")
    return context


def test_plain_http_and_strangers_are_refused(tmp_path: Path) -> None:
    with door(tmp_path) as registry:
        with pytest.raises(httpx.HTTPError):  # a TLS listener: plain HTTP gets no answer
            httpx.get(f"http://{registry.address}/v2/", timeout=10)
        with httpx.Client(verify=registry.ca.anonymous(), timeout=10) as https:
            bare = https.get(f"{registry.url}/v2/")
            assert bare.status_code == 401, bare.text
            assert bare.headers["www-authenticate"].startswith("Basic ")
            assert bare.headers["docker-distribution-api-version"] == "registry/2.0"
            assert bare.json()["errors"][0]["code"] == "UNAUTHORIZED"
            for auth in (("x", "not-the-token"), ("x", TOKEN + "x")):
                wrong = https.post(f"{registry.url}/v2/intruder/blobs/uploads/", auth=auth)
                assert wrong.status_code == 401, wrong.text
            ok = https.get(f"{registry.url}/v2/_catalog", auth=("anyone", TOKEN))
            assert ok.status_code == 200, ok.text
        # A push with no credential, by a client as a user would run it: refused, nothing kept.
        layout = tmp_path / "layout"
        subprocess.run(["umoci", "init", "--layout", str(layout)], check=True)
        subprocess.run(["umoci", "new", "--image", f"{layout}:t"], check=True)
        certs = tmp_path / "certs"
        certs.mkdir()
        (certs / "ca.crt").write_text(registry.ca.ca_pem)
        pushed = subprocess.run(["skopeo", "copy", "--dest-cert-dir", str(certs),
                                 f"oci:{layout}:t", f"docker://{registry.address}/intruder:1"],
                                capture_output=True, text=True, check=False)
        assert pushed.returncode != 0
        assert "unauthorized" in pushed.stderr.lower() or "authentication required" in \
            pushed.stderr.lower(), pushed.stderr
        with httpx.Client(verify=registry.ca.anonymous(), timeout=10) as https:
            listed = https.get(f"{registry.url}/v2/_catalog", auth=("x", TOKEN)).json()
        assert listed["repositories"] == []
        # A worker's certificate pulls, never pushes; another role's opens nothing.
        worker = TlsDir(registry.worker()).identity_path
        as_worker = registry.ca.anonymous()
        as_worker.load_cert_chain(worker)
        with httpx.Client(verify=as_worker, timeout=10) as https:
            assert https.get(f"{registry.url}/v2/").status_code == 200
            denied = https.post(f"{registry.url}/v2/intruder/blobs/uploads/")
            assert denied.status_code == 403, denied.text
            assert denied.json()["errors"][0]["code"] == "DENIED"
        with httpx.Client(verify=registry.ca.context("broker"), timeout=10) as https:
            assert https.get(f"{registry.url}/v2/").status_code == 403
        with httpx.Client(verify=registry.ca.expired("worker"), timeout=10) as https, \
                pytest.raises(httpx.HTTPError):
            https.get(f"{registry.url}/v2/")  # an expired certificate: refused in the handshake


def test_too_many_wrong_tokens_from_one_address_are_told_to_wait(tmp_path: Path) -> None:
    with door(tmp_path) as registry, httpx.Client(verify=registry.ca.anonymous(),
                                                  timeout=10) as https:
        codes = [https.get(f"{registry.url}/v2/", auth=("x", f"guess-{i}")).status_code
                 for i in range(25)]
        assert codes[:20] == [401] * 20
        assert codes[-1] == 429
        # The right token is never refused for its address's failures.
        assert https.get(f"{registry.url}/v2/", auth=("x", TOKEN)).status_code == 200


@needs_buildah
def test_the_admin_token_pushes_and_a_worker_pulls_with_its_certificate(
        tmp_path: Path) -> None:
    with door(tmp_path) as registry:
        reference = f"{registry.address}/image-app:v1"
        push = PushTarget(registry.address, registry.ca.ca_pem, TOKEN, "the test")
        try:
            digest = build_and_push(app_context(tmp_path), reference, None, push)
            worker = TlsDir(registry.worker()).identity_path
            pulled = asyncio.run(registry.puller(tmp_path / "store", worker).pull(reference))
            assert pulled == digest
            config = ImageStore(tmp_path / "store").image_config(pulled).config
            assert config.entrypoint == ["/bin/busybox", "httpd", "-f", "-p", "8080", "-h",
                                         "/www"]
            with pytest.raises(RegistryError, match="unauthorized"):  # no certificate: no pull
                asyncio.run(registry.puller(tmp_path / "store2", None).pull(reference))
            wrong = PushTarget(registry.address, registry.ca.ca_pem, "an-app-token", "ctx")
            with pytest.raises(ValueError, match="refused the push: it takes pushes with an "
                                                 "admin token, and the token from ctx"):
                build_and_push(app_context(tmp_path / "again"), reference, None, wrong)
        finally:
            subprocess.run(["buildah", "rmi", "-f", reference], capture_output=True,
                           check=False)


def test_its_certificate_is_renewed_and_served_with_no_restart(tmp_path: Path) -> None:
    with door(tmp_path, validity="12s") as registry:
        first = served_certificate(registry.address, registry.ca.ca_pem)
        names = first.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "spiffe://doorcluster/image-registry/registry" in names.get_values_for_type(
            x509.UniformResourceIdentifier)
        children = (Path(f"/proc/{registry.process.pid}/task/{registry.process.pid}/children")
                    .read_text().split())

        def renewed() -> bool:
            return served_certificate(registry.address, registry.ca.ca_pem).serial_number \
                != first.serial_number

        until_sync(renewed, "a renewed certificate served", timeout=30, every=0.5)  # at 8 s
        assert registry.process.poll() is None
        assert (Path(f"/proc/{registry.process.pid}/task/{registry.process.pid}/children")
                .read_text().split()) == children  # the same docker-registry serves on
        worker = TlsDir(registry.worker()).identity_path
        with httpx.Client(verify=registry.ca.anonymous(), timeout=10) as https:
            assert https.get(f"{registry.url}/v2/", auth=("x", TOKEN)).status_code == 200
        as_worker = registry.ca.anonymous()
        as_worker.load_cert_chain(worker)
        with httpx.Client(verify=as_worker, timeout=10) as https:
            assert https.get(f"{registry.url}/v2/").status_code == 200
        assert json.loads((tmp_path / "ready.json").read_text())["url"] == registry.url


def test_a_front_killed_with_sigkill_leaves_one_registry_on_its_storage(
        tmp_path: Path) -> None:
    """SIGKILL of `bodega image-registry`, then a start on the same data dir (its
    supervisor's restart): exactly one docker-registry serves the storage afterwards, the
    new front's own, and it answers through the front."""
    with door(tmp_path) as registry:
        (first,) = registries_serving(registry.data)
        assert children(registry.process.pid) == [first]
        registry.process.kill()
        registry.process.wait(30)
        port = int(registry.address.rsplit(":", 1)[1])
        registry.process = start_front(tmp_path, port, "1h")
        serving = registries_serving(registry.data)
        assert serving == children(registry.process.pid), (first, serving)
        assert len(serving) == 1, serving
        with httpx.Client(verify=registry.ca.anonymous(), timeout=10) as https:
            listed = https.get(f"{registry.url}/v2/_catalog", auth=("x", TOKEN))
        assert listed.status_code == 200, listed.text


def test_a_registry_an_earlier_run_left_serving_is_ended_before_the_next_starts(
        tmp_path: Path) -> None:
    """A docker-registry with no death signal (an older bodega's, its front killed) still
    serving the data dir's configuration: the next start ends it, then starts its own."""
    with door(tmp_path) as registry:
        port = int(registry.address.rsplit(":", 1)[1])
        registry.process.terminate()
        registry.process.wait(30)
        assert registries_serving(registry.data) == []
        left = subprocess.Popen([shutil.which("docker-registry") or "docker-registry", "serve",
                                 str(registry.data / "registry.yml")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            until_sync(lambda: (registry.data / "registry.sock").exists(),
                       "the left registry listening", timeout=30, every=0.05)
            registry.process = start_front(tmp_path, port, "1h")
            assert left.poll() is not None  # ended, by its SIGTERM
            assert registries_serving(registry.data) == children(registry.process.pid)
            with httpx.Client(verify=registry.ca.anonymous(), timeout=10) as https:
                listed = https.get(f"{registry.url}/v2/_catalog", auth=("x", TOKEN))
            assert listed.status_code == 200, listed.text
        finally:
            left.kill()
            left.wait(10)
