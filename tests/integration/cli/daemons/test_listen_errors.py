"""A daemon whose port is taken says so in one line: the address, and the flag that moves it.

Real `bodega worker|broker|proxy` processes against real sockets held here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.keyring_kit import ENV as KEYRING_ENV
from tests.tls_kit import TEST_CA

ENV = {**os.environ, **KEYRING_ENV, "BODEGA_API_TOKEN": "listen-token"}


@pytest.fixture
def tcp_taken() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def udp_taken() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def bodega(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bodega", *args, "--log-level", "warning"],
                          capture_output=True, text=True, env=ENV, timeout=120, check=False)


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 1, done.stderr
    return [line for line in done.stderr.splitlines() if line.startswith("Error")]


def in_use(port: int, transport: str, flag: str) -> str:
    return (f"Error: cannot listen on 127.0.0.1:{port} ({transport}): address already in use; "
            f"move it with {flag}")


def test_worker_names_listen_and_gossip_listen(tmp_path: Path, tcp_taken: int,
                                               udp_taken: int) -> None:
    base = ("worker", "--name", "w", "--region", "ams", "--driver", "null",
            "--data-dir", str(tmp_path))
    TEST_CA.issue(tmp_path / "tls", "worker", "w")
    done = bodega(*base, "--listen", f"127.0.0.1:{tcp_taken}")
    assert done.stderr.splitlines() == [in_use(tcp_taken, "TCP", "--listen")]
    done = bodega(*base, "--gossip-listen", f"127.0.0.1:{udp_taken}")
    assert done.stderr.splitlines() == [in_use(udp_taken, "UDP", "--gossip-listen")]
    assert done.returncode == 1


def test_broker_names_listen_and_gossip_listen(tmp_path: Path, tcp_taken: int,
                                               udp_taken: int) -> None:
    base = ("broker", "--name", "b", "--data-dir", str(tmp_path))
    TEST_CA.issue(tmp_path / "tls", "broker", "b")
    done = bodega(*base, "--listen", f"127.0.0.1:{tcp_taken}")
    assert errors(done) == done.stderr.splitlines() == [in_use(tcp_taken, "TCP", "--listen")]
    done = bodega(*base, "--listen", "127.0.0.1:0", "--gossip-listen", f"127.0.0.1:{udp_taken}")
    assert errors(done) == done.stderr.splitlines() == [
        in_use(udp_taken, "UDP", "--gossip-listen")]


def test_proxy_names_listen_admin_listen_and_gossip_listen(tmp_path: Path, tcp_taken: int,
                                                           udp_taken: int) -> None:
    base = ("proxy", "--name", "p", "--region", "ams", "--data-dir", str(tmp_path))
    TEST_CA.issue(tmp_path / "tls", "proxy", "p")
    done = bodega(*base, "--listen", f"127.0.0.1:{tcp_taken}")
    assert errors(done) == [in_use(tcp_taken, "TCP", "--listen")]
    done = bodega(*base, "--listen", "127.0.0.1:0", "--admin-listen", f"127.0.0.1:{tcp_taken}")
    assert errors(done) == [in_use(tcp_taken, "TCP", "--admin-listen")]
    done = bodega(*base, "--listen", "127.0.0.1:0", "--gossip-listen", f"127.0.0.1:{udp_taken}")
    assert errors(done) == [in_use(udp_taken, "UDP", "--gossip-listen")]


def test_up_names_api_port_proxy_port_and_gossip_port(tmp_path: Path, tcp_taken: int,
                                                      udp_taken: int) -> None:
    base = ("up", "--data-dir", str(tmp_path), "--driver", "null", "--regions", "ams",
            "--workers-per-region", "1")
    done = bodega(*base, "--api-port", str(tcp_taken))
    assert done.stdout == ""
    assert errors(done) == done.stderr.splitlines() == [in_use(tcp_taken, "TCP", "--api-port")]
    done = bodega(*base, "--api-port", "0", "--proxy-port", str(tcp_taken),
                  "--proxy-tls-port", "0")
    assert errors(done) == done.stderr.splitlines() == [
        in_use(tcp_taken, "TCP", "--proxy-port")]
    done = bodega(*base, "--api-port", "0", "--proxy-port", "0", "--proxy-tls-port", "0",
                  "--gossip-port", str(udp_taken))
    assert errors(done) == done.stderr.splitlines() == [
        in_use(udp_taken, "UDP", "--gossip-port")]
    assert list(tmp_path.iterdir()) == []  # refused: not even its lock file is left
