"""What machines use and what apps serve, on a real `bodega up`: the fly_* series.

A process machine and an image machine (runc or crun) burn CPU and take memory a
few seconds after they start: their ``fly_instance_cpu_seconds_total`` and
``fly_instance_memory_bytes`` on the worker's ``/metrics`` rise from what the first
scrape read. Requests answered 200 and 404 through the proxy are counted by status
class for the machine that answered and for the app at the edge, from HAProxy's own
counters. The module's tests share one cluster, each with apps of its own, and destroy
their burning machines as they end (the next test's figures are not theirs to slow).
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from bodega.runtime.tls.files import TlsDir
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.integration.images.image_kit import build_image, needs_image_tools
from tests.poll_kit import until as poll_until
from tests.python_kit import machine_python

pytestmark = [needs_image_tools, pytest.mark.asyncio(loop_scope="module")]
until = partial(poll_until, timeout=60.0, every=0.5)

MB = 1 << 20
# Answers /missing... with 404 and the rest with 200; four seconds after it starts it
# takes 96 MB and burns about half a CPU.
BURNER = """
import http.server, threading, time
hold = []
def burn():
    time.sleep(4)
    hold.append(b"\\x01" * (96 << 20))
    while True:
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            pass
        time.sleep(0.05)
threading.Thread(target=burn, daemon=True).start()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        code = 404 if self.path.startswith("/missing") else 200
        self.send_response(code); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("0.0.0.0", 8080), H).serve_forever()
"""
# The same in the busybox image: 48 MB in its /dev/shm (tmpfs, charged to its cgroup).
IMAGE_BURNER = ("sleep 4; busybox dd if=/dev/zero of=/dev/shm/fill bs=1M count=48; "
                "while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.1; done")
SERVICE = [{"protocol": "tcp", "internal_port": 8080,
            "ports": [{"port": 80, "handlers": ["http"]}]}]

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass(frozen=True)
class FiguresUp:
    up: UpProcess
    http: httpx.AsyncClient  # the Machines API, with the cluster's token
    proxy: str  # the proxy's public URL
    registry: str  # host:port of the cluster's image registry
    operator: ssl.SSLContext  # the operator's identity: /metrics is theirs

    def url(self, role: str, key: str = "url") -> str:
        (found,) = [c[key] for c in self.up.state()["components"] if c["role"] == role]
        return str(found)

    async def scrape(self, role: str) -> Series:
        url = self.url("worker") if role == "worker" else self.url("proxy", "admin_url")
        async with httpx.AsyncClient(verify=self.operator, timeout=30) as client:
            text = (await client.get(f"{url}/metrics")).text
        return {(s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}


def one(series: Series, name: str, **labels: str) -> float | None:
    """The value of the one sample of ``name`` whose labels include ``labels``."""
    found = [v for (n, have), v in series.items()
             if n == name and set(labels.items()) <= have]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FiguresUp]:
    api, proxy, registry = free_port(), free_port(), free_port()
    data = tmp_path_factory.mktemp("figures") / "cluster"
    up = await UpProcess(
        data, "--regions", "ams", "--workers-per-region", "1", "--api-port", str(api),
        "--proxy-port", str(proxy), "--proxy-tls-port", "0",
        "--registry-port", str(registry), "--machine-cidr", machine_cidr(100, 200)).start()
    try:
        await up.until_line("bodega is up")
        operator = ssl.create_default_context(cafile=str(data / "tls" / "ca.pem"))
        operator.load_cert_chain(TlsDir(data / "tls" / "admin").identity_path)
        headers = {"authorization": f"Bearer {up.token()}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api}", headers=headers,
                                     timeout=60) as http:
            yield FiguresUp(up, http, f"http://127.0.0.1:{proxy}", f"127.0.0.1:{registry}",
                            operator)
    finally:
        assert await up.stop() == 0, up.output[-2000:]
        await unwire(data)


async def started(http: httpx.AsyncClient, app: str, config: dict[str, object]) -> str:
    assert (await http.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})
            ).status_code == 201
    created = await http.post(f"/v1/apps/{app}/machines", json={"config": config})
    assert created.status_code == 200, created.text
    mid = str(created.json()["id"])
    waited = await http.get(f"/v1/apps/{app}/machines/{mid}/wait",
                            params={"state": "started", "timeout": 60})
    assert waited.status_code == 200, waited.text
    return mid


async def destroyed(http: httpx.AsyncClient, app: str, machine: str) -> None:
    gone = await http.delete(f"/v1/apps/{app}/machines/{machine}", params={"force": "true"})
    assert gone.status_code == 200, gone.text


async def rises(cluster: FiguresUp, machine: str, memory_by: int,
                limit: int = 256 * MB) -> None:
    """The machine's cpu seconds and memory, from the first scrape, rise as it burns."""
    labels = {"machine": machine, "region": "ams", "host": "ams-1", "org": "personal"}

    async def running() -> Series | None:  # an image machine's runtime may still be joining
        series = await cluster.scrape("worker")  # its cgroups as its start is answered
        found = one(series, "fly_instance_cpu_seconds_total", **labels) is not None
        return series if found else None
    first = await until(running, what=f"machine {machine}'s cpu series")
    cpu = one(first, "fly_instance_cpu_seconds_total", **labels)
    memory = one(first, "fly_instance_memory_bytes", **labels)
    assert cpu is not None, {k: v for k, v in first.items() if k[0].startswith("fly_")}
    assert memory is not None
    assert one(first, "fly_instance_memory_limit_bytes", **labels) == limit

    async def risen() -> bool:
        now = await cluster.scrape("worker")
        later_cpu = one(now, "fly_instance_cpu_seconds_total", **labels) or 0.0
        later_memory = one(now, "fly_instance_memory_bytes", **labels) or 0.0
        return later_cpu >= cpu + 1.0 and later_memory >= memory + memory_by
    await until(risen, what=f"machine {machine}'s cpu and memory rising")
    peak = one(await cluster.scrape("worker"), "fly_instance_memory_peak_bytes", **labels)
    assert peak is not None
    assert peak >= memory + memory_by


async def test_a_burning_machines_cpu_and_memory_rise_and_requests_count_by_status(
        cluster: FiguresUp, tmp_path: Path) -> None:
    http = cluster.http
    image = await asyncio.to_thread(build_image, tmp_path, cluster.registry, "demo/burn:v1",
                                    cluster=cluster.up.data_dir)
    boxed, burner = await asyncio.gather(
        started(http, "burnbox", {
            "image": image, "init": {"exec": ["/bin/sh", "-c", IMAGE_BURNER]},
            "guest": {"cpus": 1, "memory_mb": 256}}),
        started(http, "burn", {
            "image": "local/burn", "init": {"exec": [machine_python(), "-c", BURNER]},
            "guest": {"cpus": 1, "memory_mb": 256}, "services": SERVICE}))
    # Each rises on its own: the two are waited for at once.
    await asyncio.gather(rises(cluster, boxed, 40 * MB), rises(cluster, burner, 80 * MB))
    await destroyed(http, "burnbox", boxed)
    # Each machine is in a network namespace of its own: its eth0 counts what it is sent.
    received = one(await cluster.scrape("worker"), "fly_instance_net_recv_bytes_total",
                   machine=burner)
    assert received is not None

    labels = {"app": "burn", "machine": burner, "region": "ams", "host": "ams-1",
              "org": "personal"}
    async with httpx.AsyncClient(base_url=cluster.proxy, timeout=30,
                                 headers={"host": "burn.localhost"}) as web:
        await until(lambda: ok(web), what="the proxy routing to the machine")

        def first_counted(series: Series) -> bool:  # the one 200 the wait above got
            return (one(series, "fly_app_http_responses_count", status="2xx", **labels)
                    == one(series, "fly_edge_http_responses_count", status="2xx", app="burn")
                    == 1)
        before = await until(lambda: scraped_if(cluster, first_counted),
                             what="the first request counted")
        sent = {"2xx": 7, "4xx": 5}
        for path, n in (("/", sent["2xx"]), ("/missing", sent["4xx"])):
            for _ in range(n):
                assert (await web.get(path)).status_code == (200 if path == "/" else 404)

    def moved(series: Series, name: str, status: str, **labels: str) -> float:
        then = one(before, name, status=status, **labels) or 0.0
        return (one(series, name, status=status, **labels) or 0.0) - then

    def counted(series: Series) -> bool:
        return all(moved(series, "fly_app_http_responses_count", status, **labels) == n
                   and moved(series, "fly_edge_http_responses_count", status, app="burn") == n
                   for status, n in sent.items())
    after = await until(lambda: scraped_if(cluster, counted), what="the counts of the requests")
    assert moved(after, "fly_app_http_responses_count", "5xx", **labels) == 0
    assert (one(after, "fly_app_tcp_connects_count", **labels) or 0) >= 1
    assert one(after, "fly_app_concurrency", **labels) is not None
    # Twelve requests and their connections' packets came in through its eth0.
    now = one(await cluster.scrape("worker"), "fly_instance_net_recv_bytes_total",
              machine=burner)
    assert now is not None
    assert now >= received + 12 * len("GET / HTTP/1.1\r\n")
    await destroyed(http, "burn", burner)


async def ok(web: httpx.AsyncClient) -> bool:
    return (await web.get("/")).status_code == 200


async def scraped_if(cluster: FiguresUp, check: Callable[[Series], bool]) -> Series | None:
    series = await cluster.scrape("proxy")
    return series if check(series) else None



@pytest.mark.parametrize("isolation", [
    pytest.param("sandbox", marks=pytest.mark.skipif(shutil.which("runsc") is None,
                                                     reason="needs runsc")),
    pytest.param("vm", marks=[
        pytest.mark.slow,
        pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu"),
        pytest.mark.skipif(not any(DEFAULT_KERNEL_DIR.glob("boot/vmlinuz-*")),
                           reason="needs the vm kernel (scripts/host-packages)")]),
])
async def test_a_sandbox_and_a_vm_are_measured_from_their_cgroups(
        cluster: FiguresUp, tmp_path: Path, isolation: str) -> None:
    """runsc's sandbox and qemu are in the machine's cgroups as any machine: their cpu
    and memory rise as the program in them burns (a VM's limit is its guest's memory
    and qemu's own beside it)."""
    image = await asyncio.to_thread(build_image, tmp_path, cluster.registry,
                                    f"demo/{isolation}:v1", cluster=cluster.up.data_dir)
    machine = await started(cluster.http, f"burn{isolation}", {
        "image": image, "init": {"exec": ["/bin/sh", "-c", IMAGE_BURNER]},
        "guest": {"cpus": 1, "memory_mb": 256, "isolation": isolation}})
    if isolation == "vm":
        labels = {"machine": machine}
        series = await until(lambda: cluster.scrape("worker"))
        vm_limit = one(series, "fly_instance_memory_limit_bytes", **labels)
        assert vm_limit is not None
        assert vm_limit > 256 * MB
        await rises(cluster, machine, 32 * MB, limit=int(vm_limit))
    else:
        await rises(cluster, machine, 32 * MB)
    # Its namespace's eth0, read through a process of it in that namespace (a sandbox's
    # first process, one of runsc's own, is in an empty namespace).
    series = await cluster.scrape("worker")
    assert one(series, "fly_instance_net_recv_bytes_total", machine=machine) is not None
    assert one(series, "fly_instance_net_sent_bytes_total", machine=machine) is not None
    await destroyed(cluster.http, f"burn{isolation}", machine)
