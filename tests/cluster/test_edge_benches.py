"""bench/proxy/http.py and bench/proxy/edge.py at a tiny size, so they cannot rot: each starts
`bodega up`, routes through its proxy beside nginx, and prints every figure and ratio. No rate is
asserted: the figures are the benches' to print, not the test's to judge."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

TINY = ["--duration", "1", "--rounds", "1", "--connections", "4"]
BENCHES = {"bench.proxy.http": TINY, "bench.proxy.edge": [*TINY, "--megabytes", "1"]}
RATIO = r"\d+\.\d\dx"


def run(module: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)


def test_the_edge_benches_run_on_bodega_up_and_print_their_ratios() -> None:
    for tool in ("wrk", "nginx", "haproxy"):
        assert shutil.which(tool), f"{tool} missing: run scripts/host-packages"
    with ThreadPoolExecutor(len(BENCHES)) as pool:
        proxy, edge = pool.map(lambda item: run(*item), BENCHES.items())
    assert proxy.returncode == 0, proxy.stdout + proxy.stderr
    assert edge.returncode == 0, edge.stdout + edge.stderr
    assert "data plane" in proxy.stdout  # the plane `bodega up` chose, named
    assert re.search(rf"bodega/nginx {RATIO}; nginx/direct {RATIO}", proxy.stdout), proxy.stdout
    assert re.search(r"added p50 for one client: nginx [+-][\d.]+ ms, bodega [+-][\d.]+ ms",
                     proxy.stdout), proxy.stdout
    for figure in ("new TLS connections, resumed", "full TLS handshakes"):
        line = next((x for x in edge.stdout.splitlines() if figure in x), "")
        assert re.search(rf"bodega/nginx {RATIO}", line), edge.stdout
    assert re.search(rf"through bodega's proxy \d+ MB/s \({RATIO}\)", edge.stdout), edge.stdout
