"""A refused `bodega up` or `bodega join` leaves its data dir as it found it: a dir it made
is gone again, a dir that was there holds exactly what it held. Real commands, refused
before they start anything: a port held here, a machine range held here, a join token
that is not one, a join address where nothing listens."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bodega.cluster import machine_range
from tests.ports_kit import free_port

UP = ("up", "--driver", "null", "--regions", "ams", "--workers-per-region", "1",
      "--proxy-tls-port", "0", "--log-level", "warning")
JOIN = ("join", "--region", "syd", "--advertise", "127.0.0.1", "--log-level", "warning")


@pytest.fixture
def tcp_taken() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def bodega(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BODEGA_JOIN_TOKEN"}
    return subprocess.run([sys.executable, "-m", "bodega", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refusal is."""
    lines = done.stderr.splitlines()
    assert (done.returncode, len(lines)) == (1, 1), done.stderr
    assert lines[0].startswith("Error: "), done.stderr
    return lines[0]


def contents(where: Path) -> dict[str, bytes]:
    """Every file and directory under ``where``, with what each file holds; a lock file's
    pid aside (a run that takes the lock writes its own there, whatever happens next)."""
    return {str(p.relative_to(where)): p.read_bytes() if p.is_file() and p.suffix != ".lock"
            else b"" for p in sorted(where.rglob("*"))}


def an_old_data_dir(where: Path) -> dict[str, bytes]:
    """A data dir a cluster used before (and its lock file, as a stopped run leaves it)."""
    (where / "logs").mkdir(parents=True)
    (where / "logs" / "broker.log").write_text("an old line\n")
    (where / "api-token").write_text("old-token\n")
    (where / "up.lock").write_text("12345\n")
    return contents(where)


def test_a_refused_up_removes_the_data_dir_it_made(tmp_path: Path, tcp_taken: int) -> None:
    new = tmp_path / "new" / ".bodega2"
    done = bodega(*UP, "--data-dir", str(new), "--api-port", str(tcp_taken))
    assert "address already in use; move it with --api-port" in refused(done)
    assert list(tmp_path.iterdir()) == []  # the parent it made too


def test_a_refused_up_leaves_a_data_dir_it_found_as_it_was(tmp_path: Path,
                                                           tcp_taken: int) -> None:
    old = tmp_path / ".bodega"
    before = an_old_data_dir(old)
    done = bodega(*UP, "--data-dir", str(old), "--api-port", str(tcp_taken))
    assert "move it with --api-port" in refused(done)
    assert contents(old) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    done = bodega(*UP, "--data-dir", str(empty), "--api-port", str(tcp_taken))
    assert "move it with --api-port" in refused(done)
    assert list(empty.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a machine range is claimed as root only")
def test_an_up_refused_a_machine_range_takes_back_its_cluster_id(tmp_path: Path) -> None:
    cidr = "10.251.0.0/16"  # held here for the test: its first /24 is worker 1's
    held = machine_range.claim(cidr, ["10.251.1.0/24"], tmp_path / "holder", "aheld")
    args = (*UP, "--driver", "process", "--machine-cidr", cidr, "--api-port", "0",
            "--proxy-port", "0")
    try:
        new = tmp_path / "new"
        done = bodega(*args, "--data-dir", str(new))
        assert "overlaps 10.251.1.0/24" in refused(done)
        assert not new.exists()
        old = tmp_path / "old"
        before = an_old_data_dir(old)
        done = bodega(*args, "--data-dir", str(old))
        assert "overlaps 10.251.1.0/24" in refused(done)
        assert contents(old) == before  # the cluster id it made before the claim is gone
    finally:
        held.release()


def test_a_join_refused_leaves_nothing_behind(tmp_path: Path) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    new = tmp_path / "new" / "host"
    done = bodega(*JOIN, nowhere, "--token", "not-a-token", "--data-dir", str(new))
    assert refused(done).startswith("Error: not a join token")
    done = bodega(*JOIN, nowhere, "--data-dir", str(new))
    assert refused(done).startswith("Error: --token is needed to join")
    token = "K10" + "0" * 64 + "::0123abcd." + "s" * 24  # well formed, for no cluster
    done = bodega(*JOIN, nowhere, "--token", token, "--data-dir", str(new))
    said = refused(done)
    # In words, not the HTTP library's repr of its TLS context.
    assert said == (f"Error: cannot reach the join listener at https://{nowhere}: connection "
                    "refused (is `bodega up --advertise` running there, and is its join port "
                    "open?)")
    assert list(tmp_path.iterdir()) == []
    old = tmp_path / "old"
    before = an_old_data_dir(old)
    done = bodega(*JOIN, nowhere, "--token", token, "--data-dir", str(old))
    assert refused(done).startswith("Error: cannot reach the join listener")
    assert contents(old) == before


def test_a_joined_host_restarted_while_its_cluster_is_silent_is_warned(tmp_path: Path) -> None:
    """A restart needs no token and starts the workers whether or not the cluster answers;
    when the host it joined through does not, it says so before anything else."""
    from bodega.cluster.joined import JoinedHost, JoinedWorker

    nowhere = f"127.0.0.1:{free_port()}"
    data = tmp_path / "joined"
    data.mkdir()
    JoinedHost(cluster_id="quiet", ca_sha256="0" * 64, region="syd", advertise="127.0.0.1",
               join=nowhere, api_url="http://127.0.0.1:1", seeds=[nowhere],
               workers=[JoinedWorker(name="syd-abc-1")]).write(data)
    done = bodega("join", nowhere, "--data-dir", str(data), "--driver", "null",
                  "--no-private-network", "--log-level", "warning")
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warned == [f"warning: {nowhere}, the host this one joined through, does not answer "
                      "(connection refused): the workers start, run the machines kept here, and "
                      "join the cluster through any member that answers (they say so in their "
                      "logs until one does)"], done.stdout + done.stderr
