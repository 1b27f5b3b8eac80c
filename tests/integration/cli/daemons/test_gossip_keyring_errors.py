"""A daemon without a gossip keyring, or with a bad one, says so in one line before it starts;
`bodega up` with a damaged keyring file names the file. Real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bodega.registry.sealing import keyfile
from tests.keyring_kit import KEYRING

SECRETS = {"BODEGA_API_TOKEN": "keyring-token"}


def bodega(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BODEGA_GOSSIP")}
    return subprocess.run([sys.executable, "-m", "bodega", *args, "--log-level", "warning"],
                          capture_output=True, text=True, env={**base, **SECRETS, **env},
                          timeout=120, check=False)


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: "), done.stderr
    return lines[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("role", [("worker", "--region", "ams", "--driver", "null"),
                                  ("broker",), ("proxy", "--region", "ams")])
def test_a_daemon_needs_a_keyring_and_says_how_to_give_one(tmp_path: Path,
                                                           role: tuple[str, ...]) -> None:
    daemon = (*role, "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0")
    assert "--gossip-keyring FILE" in one_error(bodega(*daemon))
    damaged = tmp_path / "gossip-keyring"
    damaged.write_text('{"primary": "x"}')
    line = one_error(bodega(*daemon, "--gossip-keyring", str(damaged)))
    assert str(damaged) in line
    assert "not a gossip keyring" in line
    keyfile.write(damaged, KEYRING)
    line = one_error(bodega(*daemon, "--gossip-keyring", str(damaged),
                            BODEGA_GOSSIP_KEYRING=KEYRING.to_json()))
    assert "not both" in line
    assert "not a gossip keyring" in one_error(bodega(*daemon, BODEGA_GOSSIP_KEYRING="{}"))


def test_bodega_up_names_a_damaged_keyring_file(tmp_path: Path) -> None:
    data = tmp_path / ".bodega"
    data.mkdir()
    (data / "gossip-keyring").write_text("not json")
    done = bodega("up", "--data-dir", str(data), "--regions", "ams", "--driver", "null",
                  "--api-port", str(free_port()), "--proxy-port", str(free_port()),
                  "--proxy-tls-port", "0", "--registry-port", "0")
    line = one_error(done)
    assert str(data / "gossip-keyring") in line
    assert (data / "gossip-keyring").read_text() == "not json"  # nothing overwritten
