"""What a metrics store costs here: VictoriaMetrics beside Prometheus, each scraping the
same few hundred series every 15 s.

Both Debian programs run at once against the same targets (``--targets`` HTTP
servers in this process, ``--series`` gauges each, their values changing at every
scrape), each with a fresh data dir; after a warm-up of one scrape interval, each
one's CPU time (``/proc/<pid>/stat``) is read over ``--duration`` seconds, and its
resident memory (``VmRSS``, and ``VmHWM``, the most it held) at the end.

    python -m bench.metrics.store_cost --targets 20 --series 25 --duration 120
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def serve_targets(count: int, series: int) -> list[ThreadingHTTPServer]:
    class Target(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            lines = [f'bench_gauge{{n="{i}"}} {random.random()}' for i in range(series)]
            body = ("\n".join(lines) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    servers = []
    for _ in range(count):
        server = ThreadingHTTPServer(("127.0.0.1", 0), Target)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    return servers


def config(targets: list[str], interval: int) -> str:
    return json.dumps({"global": {"scrape_interval": f"{interval}s"},
                       "scrape_configs": [{"job_name": "bench",
                                           "static_configs": [{"targets": targets}]}]})


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    return 0


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--series", type=int, default=25)
    parser.add_argument("--interval", type=int, default=15)
    parser.add_argument("--duration", type=float, default=120.0)
    args = parser.parse_args()
    servers = serve_targets(args.targets, args.series)
    targets = [f"127.0.0.1:{s.server_address[1]}" for s in servers]
    work = Path(tempfile.mkdtemp(prefix="bench-store-"))
    (work / "scrape.json").write_text(config(targets, args.interval))
    commands = {
        "victoria-metrics": ["victoria-metrics", f"-httpListenAddr=127.0.0.1:{free_port()}",
                             f"-storageDataPath={work / 'vm'}",
                             f"-promscrape.config={work / 'scrape.json'}",
                             "-loggerLevel=ERROR"],
        "prometheus": ["prometheus", f"--config.file={work / 'scrape.json'}",
                       f"--storage.tsdb.path={work / 'prom'}",
                       f"--web.listen-address=127.0.0.1:{free_port()}", "--log.level=error"],
    }
    running = {name: subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
               for name, argv in commands.items() if shutil.which(argv[0])}
    try:
        time.sleep(args.interval + 2)  # one scrape in: caches warm, series made
        start = {name: cpu_seconds(p.pid) for name, p in running.items()}
        time.sleep(args.duration)
        print(f"{args.targets * args.series} series ({args.targets} targets x "
              f"{args.series}), scraped every {args.interval}s, over {args.duration:.0f}s:")
        print(f"{'store':<18}{'CPU %':>8}{'RSS MiB':>10}{'peak MiB':>10}")
        for name, process in running.items():
            used = cpu_seconds(process.pid) - start[name]
            print(f"{name:<18}{100 * used / args.duration:>8.2f}"
                  f"{memory_kib(process.pid, 'VmRSS') / 1024:>10.1f}"
                  f"{memory_kib(process.pid, 'VmHWM') / 1024:>10.1f}")
    finally:
        for process in running.values():
            process.terminate()
            process.wait(timeout=30)
        for server in servers:
            server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
