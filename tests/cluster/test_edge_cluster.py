"""The TLS edge of a real `bodega up`: an app served at https://<app>.localhost with no
`certs add`, trusted through <data-dir>/ca.crt; `bodega certs add|import|list|show|remove`
from the CLI, each reaching the proxy through the registry."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import httpx
import pytest

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.poll_kit import until as poll_until
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

SERVER = ("import http.server, sys\n"
          "class H(http.server.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        body = ('edge ' + self.headers.get('x-forwarded-proto', '-')).encode()\n"
          "        self.send_response(200); self.send_header('Content-Length', "
          "str(len(body))); self.end_headers(); self.wfile.write(body)\n"
          "    def log_message(self, *args): pass\n"
          "http.server.HTTPServer(('0.0.0.0', 8080), H).serve_forever()\n")


def bodega(up: UpProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bodega", *args, "--api-url",
                           up.state()["api_url"], "--token", up.token()],
                          capture_output=True, text=True, timeout=60, check=False)


async def curl(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--max-time", "10", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


until = partial(poll_until, timeout=60.0, every=0.2)


async def test_apps_answer_over_tls_with_the_cluster_ca_and_certs_come_and_go_by_the_cli(
        tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    tls_port = free_port()
    cidr = machine_cidr(150, 200)
    up = UpProcess(data, "--regions", "ams", "--workers-per-region", "1", "--worker-cpus", "2",
                   "--worker-memory-mb", "2048", "--api-port", str(free_port()),
                   "--proxy-port", str(free_port()), "--proxy-tls-port", str(tls_port),
                   "--gossip-port", str(free_port()), "--registry-port", "0",
                   "--machine-cidr", cidr, "--driver", "process")
    ca = data / "ca.crt"
    try:
        await up.start()
        await up.until_line("bodega is up")
        line = await up.until_line("HTTPS:")
        assert f"https://<app>.localhost:{tls_port}/" in line
        assert str(ca) in line
        async with httpx.AsyncClient(base_url=up.state()["api_url"], timeout=60, headers={
                "authorization": f"Bearer {up.token()}"}) as api:
            await api.post("/v1/apps", json={"app_name": "shop", "org_slug": "personal"})
            made = await api.post("/v1/apps/shop/machines", json={"config": {
                "image": "local/edge", "init": {"exec": [machine_python(), "-c", SERVER]},
                "guest": {"cpus": 1, "memory_mb": 256},
                "services": [{"protocol": "tcp", "internal_port": 8080, "ports": [
                    {"port": 80, "handlers": ["http"]},
                    {"port": 443, "handlers": ["tls", "http"]}]}]}})
            assert made.status_code == 200, made.text

        async def answers(host: str, *extra: str) -> bool:
            code, out, _ = await curl("--cacert", str(ca), *extra,
                                      f"https://{host}:{tls_port}/")
            return code == 0 and out == "edge https"

        # No `certs add`: the app's own certificate comes from the cluster CA.
        await until(lambda: answers("shop.localhost"))
        listed = bodega(up, "certs", "list", "-a", "shop")
        assert listed.returncode == 0, listed.stderr
        assert "shop.localhost" in listed.stdout
        assert "cluster-ca" in listed.stdout

        resolve = ("--resolve", f"www.shop.test:{tls_port}:127.0.0.1")
        added = bodega(up, "certs", "add", "-a", "shop", "www.shop.test")
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith("Issued www.shop.test for shop: cluster-ca")
        await until(lambda: answers("www.shop.test", *resolve))
        shown = bodega(up, "certs", "show", "-a", "shop", "www.shop.test")
        assert "Covers:      www.shop.test" in shown.stdout, shown.stderr

        # Imported: a certificate from elsewhere (openssl's own), served once its key opens.
        key, cert = tmp_path / "own.key", tmp_path / "own.crt"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=own.shop.test", "-addext",
                        "subjectAltName=DNS:own.shop.test", "-keyout", str(key),
                        "-out", str(cert)], check=True, capture_output=True)
        imported = bodega(up, "certs", "import", "-a", "shop", "own.shop.test",
                          "--cert", str(cert), "--key", str(key))
        assert imported.returncode == 0, imported.stderr
        own = ("--resolve", f"own.shop.test:{tls_port}:127.0.0.1")

        async def serves_imported() -> bool:
            code, out, _ = await curl("--cacert", str(cert), *own,
                                      f"https://own.shop.test:{tls_port}/")
            return code == 0 and out == "edge https"

        await until(serves_imported)
        wrong = bodega(up, "certs", "import", "-a", "shop", "other.shop.test",
                       "--cert", str(cert), "--key", str(key))
        assert wrong.returncode == 1
        assert wrong.stderr.strip() == ("Error: certificate for other.shop.test: the certificate "
                                        "covers own.shop.test, not other.shop.test")

        removed = bodega(up, "certs", "remove", "-a", "shop", "www.shop.test")
        assert removed.returncode == 0, removed.stderr

        async def refused() -> bool:  # the default *.localhost does not cover it
            code, _, _ = await curl("--cacert", str(ca), *resolve,
                                    f"https://www.shop.test:{tls_port}/")
            return code == 60
        await until(refused)
        assert await answers("shop.localhost")
        # No key in clear in the registry's files: only the sealed form travels.
        key_text = key.read_text().splitlines()[1]
        replicas = [p for p in data.rglob("*.db*") if key_text.encode() in p.read_bytes()]
        assert replicas == []
    finally:
        await up.stop()
        await unwire(data)
