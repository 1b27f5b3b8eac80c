"""`bodega up` and `bodega join` as root check the host commands their workers need
before they start anything: a host without ``nft`` (bodega installed with pip, not
through ``make``) is refused in one line naming the package, not by a worker exiting
mid-start. The real commands, with a PATH that lacks ``nft``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ports_kit import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root's workers need them")

REFUSED = "Error: nft is not installed: apt-get install nftables"


def without(command: str, where: Path) -> str:
    """A PATH holding every command of this one but ``command``: the system's directories
    are linked entry by entry into ``where``."""
    where.mkdir()
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        try:
            entries = list(Path(directory).iterdir())
        except OSError:
            continue
        for entry in entries:
            link = where / entry.name
            if entry.name != command and not link.exists() and not link.is_symlink():
                link.symlink_to(entry)
    return str(where)


def bodega(path: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command's exit and output; one still running after a minute (it started, and
    waits for a cluster that cannot come up) is stopped with Ctrl-C first."""
    env = {k: v for k, v in os.environ.items() if k != "BODEGA_JOIN_TOKEN"}
    argv = [sys.executable, "-m", "bodega", *args]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**env, "PATH": path}) as process:
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=120)
            err += "\n(still running after 60 s: stopped)"
        return subprocess.CompletedProcess(argv, process.returncode, out, err)


def test_up_and_join_without_nft_say_which_package_before_starting(tmp_path: Path) -> None:
    path = without("nft", tmp_path / "bin")
    check = subprocess.run(["sh", "-c", "command -v nft"], env={"PATH": path},
                           capture_output=True, check=False)
    assert check.returncode != 0, "nft is still on the test's PATH"
    data_dir = tmp_path / ".bodega"
    done = bodega(path, "up", "--data-dir", str(data_dir), "--driver", "process",
                  "--regions", "ams", "--workers-per-region", "1",
                  "--api-port", str(free_port()), "--proxy-port", str(free_port()),
                  "--proxy-tls-port", "0", "--machine-cidr", "10.252.0.0/16",
                  "--log-level", "warning")
    assert (done.returncode, done.stderr.splitlines()) == (1, [REFUSED]), (
        done.stdout + done.stderr)
    assert not data_dir.exists(), "a refused up wrote its data dir"
    joined = tmp_path / "host"
    done = bodega(path, "join", f"127.0.0.1:{free_port()}", "--region", "syd",
                  "--advertise", "127.0.0.1", "--data-dir", str(joined))
    assert (done.returncode, done.stderr.splitlines()) == (1, [REFUSED]), (
        done.stdout + done.stderr)
    assert not joined.exists()
    # The null driver runs no machine, and needs none of them: this up goes on to its
    # next check (its API port, taken here) and is refused there.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = bodega(path, "up", "--data-dir", str(data_dir), "--driver", "null",
                      "--api-port", str(taken.getsockname()[1]), "--log-level", "warning")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "move it with --api-port" in done.stderr, done.stderr
