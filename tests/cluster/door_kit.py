"""A real ``bodega up`` to knock on, and what the door tests need to knock with.

``up_cluster_with_apps`` starts the whole local cluster (process driver, as root)
in a temporary data dir with free ports, gives it two apps, a deploy token
for one of them and a machine in each, and stops everything afterwards.
``classify`` says what a socket found in /proc is, by asking it (in plain
HTTP, else in TLS with the operator's certificate ``bodega up`` keeps), so
every listener is accounted for without a list of ports in the test.
``Cluster.knocks`` are the TLS contexts that must not get in: none, another
CA's certificate, an expired one of this CA's; ``Cluster.as_role`` presents
a real component's own certificate, for the roles that may not call a route.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx
from dnslib import RCODE, DNSError, DNSRecord

from bodega.registry.sealing import keyfile
from bodega.registry.sealing.core.keyring import Keyring
from bodega.runtime.tls.authority import CertificateAuthority, utc_now
from bodega.runtime.tls.contexts import client_context
from bodega.runtime.tls.core.identity import Identity, trust_domain
from bodega.runtime.tls.files import CaDir, TlsDir
from tests.cidr_kit import octet
from tests.cluster.listener_kit import Listener
from tests.leftovers_kit import sweep_data_dir
from tests.poll_kit import until_sync
from tests.ports_kit import free_port as free_port
from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA

T = TypeVar("T")

# The machine's program prints the arguments it was given, literally, then idles.
ARGV_ECHO = "import json, sys, time; print(json.dumps(sys.argv[1:]), flush=True); time.sleep(900)"


def hostile_arguments(canary: Path) -> list[str]:
    """Arguments that would each create a file in ``canary`` if a shell ever parsed them."""
    return [f"; touch {canary}/semicolon", f"$(touch {canary}/dollar)",
            f"`touch {canary}/backtick`", f"| touch {canary}/pipe", f"&& touch {canary}/and",
            f"> {canary}/redirect", "$HOME", "*"]


@dataclass
class Cluster:
    data: Path
    api: str
    token: str  # the admin token
    keyring: Keyring  # the cluster's gossip keyring (`bodega up` made it)
    app_token: str  # a deploy token for "alpha"
    alpha_machine: str
    beta_machine: str
    canary: Path
    marker: str

    def key(self, name: str) -> str:
        """A key `bodega up` keeps in the data dir: secrets-key, api-token."""
        return (self.data / name).read_text().strip()

    @property
    def ca_pem(self) -> str:
        return (self.data / "tls" / "ca.pem").read_text()

    def tls_dir(self, role: str, name: str) -> Path:
        """Where a component's (or the operator's) identity is."""
        if role == "admin":
            return self.data / "tls" / "admin"
        return self.data / ("workers/" + name if role == "worker" else role) / "tls"

    def as_role(self, role: str, name: str = "") -> ssl.SSLContext:
        """A client context presenting that component's own certificate."""
        context = client_context(self.ca_pem)
        context.load_cert_chain(TlsDir(self.tls_dir(role, name)).identity_path)
        return context

    def operator(self) -> ssl.SSLContext:
        return self.as_role("admin")

    def knocks(self, scratch: Path) -> dict[str, ssl.SSLContext]:
        """Contexts that trust the cluster's CA and must still be refused by it."""
        stranger = client_context(self.ca_pem)
        stranger.load_cert_chain(TEST_CA.identity_file("broker", "stranger"))
        ca_cert, ca_key = CaDir(self.data / "tls").read()
        past = utc_now() - datetime.timedelta(days=1)
        old = CertificateAuthority(ca_cert, ca_key, lifetime=60.0, clock=lambda: past)
        old.issue(TlsDir(scratch / "expired"),
                  Identity(trust_domain(ca_cert), "broker", "expired"), ())
        expired = client_context(self.ca_pem)
        expired.load_cert_chain(TlsDir(scratch / "expired").identity_path)
        return {"no certificate": client_context(self.ca_pem), "another CA's": stranger,
                "an expired one": expired}

    def components(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = json.loads((self.data / "cluster.json").read_text())[
            "components"]
        return found

    def fork_server(self) -> int | None:
        """The pid of the fork server the components were forked from, if any."""
        state = json.loads((self.data / "cluster.json").read_text()).get("fork_server")
        return int(state["pid"]) if state else None

    def admin(self) -> httpx.Client:
        return httpx.Client(base_url=self.api, timeout=60,
                            headers={"authorization": f"Bearer {self.token}"})

    def secrets(self) -> dict[str, str]:
        """Every credential that must never leak, by name."""
        return {"admin token": self.token, "secrets key": self.key("secrets-key"),
                "app token": self.app_token,
                **{f"gossip key {k.id}": k.encoded() for k in self.keyring.keys}}

    def private_keys(self) -> dict[Path, bytes]:
        """Each private key `bodega up` made (the CA's, each component's), by its file: the
        base64 body that must appear nowhere else."""
        files = [self.data / "tls" / "ca-key.pem", *self.data.rglob("identity.pem")]
        found = {}
        for path in files:
            text = path.read_text()
            body = text.split("-----BEGIN PRIVATE KEY-----")[1].split("-----END")[0]
            found[path] = "".join(body.split()).encode()
        return found




until = partial(until_sync, timeout=90.0)


@contextmanager
def up_cluster_with_apps(tmp: Path) -> Iterator[Cluster]:
    # Open to everyone like a checkout's .bodega (pytest's own tmp dir is private), so
    # whatever keeps machines out of the cluster's files must be bodega's doing.
    home = Path(tempfile.mkdtemp(prefix="bodega-doors-", dir="/tmp"))
    home.chmod(0o755)
    data = home / "cluster"
    canary = home / "canary"
    canary.mkdir()
    canary.chmod(0o1777)  # the machine runs as an unprivileged user: it could write here
    token = "doors-admin-" + secrets.token_urlsafe(16)
    second = octet(248, 255)  # a /16 no other cluster test takes
    api_port = free_port()
    out = (tmp / "up.out").open("wb")
    # The token comes from the environment, as `export BODEGA_API_TOKEN` gives it.
    env = {**os.environ, "BODEGA_API_TOKEN": token}
    up = subprocess.Popen(
        [sys.executable, "-m", "bodega", "up", "--data-dir", str(data), "--regions", "ams",
         "--workers-per-region", "2", "--worker-cpus", "2", "--worker-memory-mb", "2048",
         "--api-port", str(api_port), "--proxy-port", str(free_port()),
         "--proxy-tls-port", str(free_port()),
         "--gossip-port", str(free_port()), "--registry-port", str(free_port()),
         "--machine-cidr", f"10.{second}.0.0/16"],
        stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        until(lambda: up.poll() is not None or b"bodega is up" in (tmp / "up.out").read_bytes(),
              "bodega up is up")
        assert up.poll() is None, (tmp / "up.out").read_text()[-3000:]
        cluster = Cluster(data=data, api=f"http://127.0.0.1:{api_port}", token=token,
                          keyring=keyfile.read(data / "gossip-keyring"), app_token="",
                          alpha_machine="", beta_machine="", canary=canary,
                          marker=f"doors-{secrets.token_hex(5)}")
        _populate(cluster)
        yield cluster
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            try:
                up.wait(90)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait()
        out.close()
        asyncio.run(sweep_data_dir(data))  # what a stop cut short left (nothing, normally)
        shutil.rmtree(home, ignore_errors=True)


def _populate(cluster: Cluster) -> None:
    with cluster.admin() as api:
        for app in ("alpha", "beta"):
            answer = api.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})
            assert answer.status_code == 201, answer.text
        answer = api.post("/v1/apps/alpha/deploy_token", json={})
        assert answer.status_code == 200, answer.text
        cluster.app_token = answer.json()["token"]
        argv = [machine_python(), "-c", ARGV_ECHO, cluster.marker,
                *hostile_arguments(cluster.canary)]
        idle = [machine_python(), "-c", "import time; time.sleep(900)",
                f"{cluster.marker}-beta"]
        for app, exec_argv in (("alpha", argv), ("beta", idle)):
            answer = api.post(f"/v1/apps/{app}/machines", json={"config": {
                "image": "local/doors", "init": {"exec": exec_argv},
                "guest": {"cpus": 1, "memory_mb": 256}}})
            assert answer.status_code == 200, answer.text
            mid = answer.json()["id"]
            waited = api.get(f"/v1/apps/{app}/machines/{mid}/wait",
                             params={"state": "started", "timeout": 60})
            assert waited.status_code == 200, waited.text
            if app == "alpha":
                cluster.alpha_machine = mid
            else:
                cluster.beta_machine = mid


# -- what a socket is ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Door:
    component: str
    role: str
    pid: int
    listener: Listener
    kind: str  # broker-api, broker-internal, worker-api, proxy-admin, proxy-public, gossip, ...

    def __str__(self) -> str:
        return f"{self.role} {self.component} (pid {self.pid}) {self.listener}: {self.kind}"

    @property
    def url(self) -> str:
        return self.listener.url("https" if self.kind in TLS_KINDS.values() else "http")


DNS_PORT = 53
TLS_KINDS = {"broker": "broker-internal", "worker": "worker-api", "proxy": "proxy-admin",
             "agent": "agent-internal"}


def classify(component: dict[str, Any], listener: Listener, members: list[dict[str, Any]],
             operator: ssl.SSLContext) -> str:
    """What this socket is, by asking it (in TLS with ``operator`` if plain HTTP gets no
    answer); "unknown" fails the listener test."""
    name, role = str(component["name"]), str(component["role"])
    if listener.proto == "udp" and role == "worker" and listener.port == DNS_PORT:
        return "resolver" if resolver_refuses(listener) else "unknown"
    if listener.proto == "udp":
        gossip = next((m["addr"] for m in members if m["name"] == name), None)
        return "gossip" if gossip and gossip.rsplit(":", 1)[1] == str(listener.port) else "unknown"
    if role == "metrics-store":  # VictoriaMetrics' API, behind a password on loopback
        try:
            answer = httpx.get(f"{listener.url()}/api/v1/labels", timeout=30)
        except httpx.HTTPError:
            return "unknown"
        basic = answer.headers.get("www-authenticate", "").lower().startswith("basic")
        return "metrics-store" if answer.status_code == 401 and basic else "unknown"
    if role == "registry":  # the distribution API (not bodega's), HTTPS from the cluster CA
        try:
            answer = httpx.get(f"{listener.url('https')}/v2/", timeout=30, verify=operator)
        except httpx.HTTPError:
            return "unknown"
        distribution = answer.headers.get("docker-distribution-api-version", "")
        return "image-registry" if distribution.startswith("registry/2") else "unknown"
    try:
        answer = httpx.get(f"{listener.url()}/v1/health", timeout=30)
    except httpx.HTTPError:
        try:
            answer = httpx.get(f"{listener.url('https')}/v1/health", timeout=30,
                               verify=operator)
        except httpx.HTTPError:
            return "unknown"
        secured = answer.status_code == 200 and answer.json().get("name") == name
        return TLS_KINDS.get(role, "unknown") if secured else "unknown"
    if answer.status_code == 200 and answer.headers.get("content-type", "").startswith(
            "application/json") and answer.json().get("name") == name and role == "broker":
        return "broker-api"
    if role == "proxy" and answer.status_code == 404 and "no app is served" in answer.text:
        return "proxy-public"
    if role == "worker" and answer.status_code == 404:  # a jobs door has one route
        submit = httpx.post(f"{listener.url()}/sched/submit", json={}, timeout=30)
        if submit.status_code == 401 and "jobs pass" in submit.json().get("error", ""):
            return "jobs-door"
    return "unknown"


def resolver_refuses(listener: Listener) -> bool:
    """Whether ``listener`` is the private network's resolver, refusing a stranger: asked from
    this host (no machine of any network), it answers REFUSED, naming no app."""
    query = DNSRecord.question("_apps.internal", "TXT")
    family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        try:
            sock.sendto(query.pack(), (listener.reachable_host(), listener.port))
            answer = DNSRecord.parse(sock.recv(4096))
        except (OSError, DNSError):
            return False
    return answer.header.id == query.header.id and answer.header.rcode == RCODE.REFUSED \
        and not answer.rr


def gossip_drops(metrics_text: str, reason: str) -> float | None:
    """Gossip packets dropped for ``reason``, or None if the metrics do not count drops at all."""
    if "# HELP bodega_gossip_bad_packets_total" not in metrics_text:
        return None
    match = re.search(rf'^bodega_gossip_bad_packets_total\{{reason="{reason}"\}} (\S+)$',
                      metrics_text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0  # no drop yet: the labelled child is absent


def memory_holds(pid: int, needles: tuple[bytes, ...]) -> set[bytes]:
    """Which of ``needles`` lie anywhere in the writable memory of process ``pid`` (its
    heap, stacks and anonymous maps: where it keeps its environment and what it read)."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as memory:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw") or fields[-1] in ("[vvar]", "[vsyscall]"):
                continue
            low, high = (int(bound, 16) for bound in fields[0].split("-"))
            try:
                memory.seek(low)
                chunk = memory.read(high - low)
            except OSError:
                continue
            found.update(needle for needle in needles if needle in chunk)
    return found
