"""`bodega up`: a whole cluster of separate processes that supervises itself and stops clean.

One real run: workers (process driver), a broker and a proxy come up and list
themselves in ``cluster.json``; a machine created through the API answers
through the proxy; a worker killed with SIGKILL is restarted by the
supervisor (``cluster.json`` follows its new pid) and re-adopts the machine;
two Ctrl-Cs in a row still stop everything, machines included.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from bodega.proxy.plane import WORKDIR_NOTE
from bodega.worker.drivers.process.procfs import pids_with_argument
from tests.cidr_kit import octet
from tests.cluster.up_kit import unwire
from tests.integration.broker.lifecycle_scenario import full_lifecycle
from tests.integration.broker.spec_client_kit import SpecClient
from tests.poll_kit import until as poll_until
from tests.ports_kit import free_port as free_port
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")




def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def pids_with(marker: str) -> list[int]:
    """The machine's own program (argv[0] is Python, the marker an argument), not its wrapper."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0] == machine_python().encode() and marker.encode() in argv[1:]:
                found.append(int(entry.name))
    return [p for p in found if alive(p)]


until = partial(poll_until, timeout=60.0, every=0.1)


async def test_up_runs_supervises_and_stops_everything(tmp_path: Path) -> None:
    api, proxy, gossip, tls = free_port(), free_port(), free_port(), free_port()
    data = tmp_path / "cluster"
    marker = f"bodega-up-{uuid.uuid4().hex[:10]}"
    token = "up-test-token"
    third = octet(100, 200)
    up = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "up", "--data-dir", str(data), "--regions", "ams",
        "--workers-per-region", "2", "--worker-cpus", "2", "--worker-memory-mb", "2048",
        "--api-port", str(api), "--proxy-port", str(proxy),
        "--proxy-tls-port", str(tls), "--gossip-port", str(gossip),
        "--machine-cidr", f"10.{third}.0.0/16", "--token", token, "--registry-port", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    state = data / "cluster.json"
    try:
        def components() -> list[dict[str, Any]]:
            try:
                found = json.loads(state.read_text())["components"]
            except (OSError, ValueError):
                return []
            return found if all(c.get("pid") for c in found) else []

        assert up.stdout is not None
        while b"bodega is up" not in (line := await asyncio.wait_for(up.stdout.readline(), 60)):
            assert line, "bodega up exited before it was up"
        # The metrics store runs beside them where victoria-metrics is installed.
        store = ["metrics-store"] if shutil.which("victoria-metrics") else []
        listed = await until(lambda: len(components()) == 5 + len(store) and components())
        assert sorted(c["role"] for c in listed) == ["agent", "broker", *store, "proxy",
                                                     "worker", "worker"]
        assert {c["name"] for c in listed if c["role"] == "worker"} == {"ams-1", "ams-2"}
        # The broker's and the proxy's public listeners; the workers' internal API and the
        # registry agent's sync listener, in TLS.
        assert all(c["url"].startswith("https://127.0.0.1:" if c["role"] in ("worker", "agent")
                                       else "http://127.0.0.1:") for c in listed)
        (proxy_entry,) = (c for c in listed if c["role"] == "proxy")
        assert proxy_entry["tls_url"] == f"https://127.0.0.1:{tls}"
        assert (data / "api-token").read_text().strip() == token

        base = f"http://127.0.0.1:{api}"
        headers = {"authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
            app = {"app_name": "hello", "org_slug": "personal"}
            assert (await http.post("/v1/apps", json=app)).status_code == 201
            server = ("import http.server, sys\n"
                      "class H(http.server.BaseHTTPRequestHandler):\n"
                      "    def do_GET(self):\n"
                      "        body = b'hello from bodega'\n"
                      "        self.send_response(200); self.send_header('Content-Length', "
                      "str(len(body))); self.end_headers(); self.wfile.write(body)\n"
                      "http.server.HTTPServer(('0.0.0.0', 8080), H).serve_forever()\n")
            created = await http.post("/v1/apps/hello/machines", json={"config": {
                "image": "local/hello", "init": {"exec": [machine_python(), "-c", server, marker]},
                "services": [{"protocol": "tcp", "internal_port": 8080,
                              "ports": [{"port": 80, "handlers": ["http"]}]}]}})
            assert created.status_code == 200, created.text
            mid = created.json()["id"]
            await http.get(f"/v1/apps/hello/machines/{mid}/wait", params={"state": "started"})
            async with httpx.AsyncClient(timeout=30) as web:
                for _ in range(100):  # the proxy learns of the machine through the registry
                    answer = await web.get(f"http://127.0.0.1:{proxy}/",
                                           headers={"host": "hello.localhost"})
                    if answer.status_code == 200:
                        break
                    await asyncio.sleep(0.1)
            assert answer.text == "hello from bodega"
            (program,) = await until(lambda: pids_with(marker))

            # The CLI explains the placement in words, and fails on a bad id in one line.
            env = {**os.environ, "BODEGA_API_URL": base, "BODEGA_API_TOKEN": token}
            explain = subprocess.run(
                [sys.executable, "-m", "bodega", "machine", "explain", mid, "--app", "hello"],
                capture_output=True, text=True, env=env, timeout=60, check=False)
            assert explain.returncode == 0, explain.stderr
            assert "placed on ams-" in explain.stdout
            assert "asked for 1 shared cpu, 256 MB" in " ".join(explain.stdout.split())
            missing = subprocess.run(
                [sys.executable, "-m", "bodega", "machine", "status", "nope", "--app", "hello"],
                capture_output=True, text=True, env=env, timeout=60, check=False)
            assert missing.returncode == 1
            assert missing.stderr.strip().splitlines() == [
                "Error: machine not found: 'nope' is not a machine id"]

            # A client written from the spec alone, pointed at this cluster's base URL.
            fly = SpecClient(f"{base}/v1", token)
            try:
                await full_lifecycle(fly, "speclient", {
                    "image": "local/sleeper", "init": {"exec": ["sleep", "300"]},
                    "services": [{"protocol": "tcp", "internal_port": 9, "autostop": True,
                                  "ports": [{"port": 80, "handlers": ["http"]}]}]})
            finally:
                await fly.aclose()

            async def every_member_known() -> bool:  # a join spreads by gossip: give it time
                members = (await http.get("/v1/cluster/members")).json()
                return {m["name"] for m in members} >= {"agent", "ams-1", "ams-2", "broker",
                                                         "proxy"}
            await until(every_member_known, what="the broker knowing every member")

            # kill -9 the fork server: the components it forked run on.
            forks = json.loads((data / "cluster.json").read_text())["fork_server"]["pid"]
            os.kill(forks, signal.SIGKILL)
            await asyncio.sleep(1.0)
            assert all(alive(c["pid"]) for c in listed)
            # kill -9 the worker holding the machine: supervised back, machine re-adopted,
            # forked by a fork server started again.
            machine = (await http.get(f"/v1/apps/hello/machines/{mid}/placement")).json()
            victim = next(c for c in listed if c["name"] == machine["winner"]["worker"])
            os.kill(victim["pid"], signal.SIGKILL)
            restarted = await until(lambda: next(
                (c for c in components() if c["name"] == victim["name"]
                 and c["pid"] != victim["pid"] and c.get("restarts")), None))
            assert alive(restarted["pid"])
            forks_again = json.loads((data / "cluster.json").read_text())["fork_server"]["pid"]
            assert forks_again != forks
            assert parent_of(restarted["pid"]) == forks_again
            await until(lambda: pids_with(marker) == [program])  # the same process, adopted
            got = await http.get(f"/v1/apps/hello/machines/{mid}")
            assert got.json()["state"] == "started"
            # kill -9 the proxy: supervised back, and the files its HAProxy had (certificates
            # and their keys) are removed by the restart instead of staying in /tmp.
            note = data / "proxy" / WORKDIR_NOTE
            killed_dir = Path(note.read_text().strip())
            assert killed_dir.is_dir()
            proxy = next(c for c in listed if c["name"] == "proxy")
            os.kill(proxy["pid"], signal.SIGKILL)
            proxy_again = await until(lambda: next(
                (c for c in components() if c["name"] == "proxy"
                 and c["pid"] != proxy["pid"] and c.get("restarts")), None))
            await until(lambda: not killed_dir.exists()
                        and Path(note.read_text().strip()).is_dir())
            proxy_dir = Path(note.read_text().strip())
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGINT)
            await asyncio.sleep(0.2)
            up.send_signal(signal.SIGINT)  # an impatient second Ctrl-C changes nothing
            output = await asyncio.wait_for(up.communicate(), 60)
        else:
            output = await up.communicate()
    await unwire(data)
    pids = [c["pid"] for c in listed] + [restarted["pid"], forks_again, proxy_again["pid"]]
    assert not proxy_dir.exists(), "the proxy's HAProxy files outlived bodega up"
    assert up.returncode == 0, output[0].decode()[-2000:]
    assert not [p for p in pids if alive(p)], "a component outlived bodega up"
    assert pids_with(marker) == [], "a machine outlived bodega up"
    launchers = [p for p in pids_with_argument("bodega-park") if alive(p)
                 and str(data) in Path(f"/proc/{p}/cmdline").read_text(errors="replace")]
    assert launchers == [], "a parked launcher outlived bodega up"
