"""`bodega install-service` writes a unit systemd accepts: checked with `systemd-analyze
verify` where that binary is installed (only that check is skipped where it is not); its
stop leaves the machines running unless the host shuts down."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bodega.cluster.service_unit import STOP
from tests.poll_kit import until_sync


def install(tmp: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bodega", "install-service",
                           "--unit-dir", str(tmp / "units"), "--env-dir", str(tmp / "env"),
                           "--", *command], capture_output=True, text=True, timeout=60,
                          check=False, cwd=tmp)


def test_the_unit_is_written_with_the_token_apart_and_systemd_accepts_it(
        tmp_path: Path) -> None:
    done = install(tmp_path, "join", "192.0.2.1", "--token", "K10" + "a" * 64 + "::0.s",
                   "--region", "syd", "--data-dir", "host data")
    assert done.returncode == 0, done.stderr
    unit = tmp_path / "units" / "bodega-join.service"
    env = tmp_path / "env" / "bodega-join.env"
    assert "systemctl enable --now bodega-join" in done.stdout
    text = unit.read_text()
    assert "K10" not in text
    assert f"{sys.executable} -m bodega join 192.0.2.1 --region syd --data-dir " \
           '"host data"' in text
    assert f"WorkingDirectory={tmp_path}" in text
    assert env.read_text().startswith("BODEGA_JOIN_TOKEN=K10")
    assert env.stat().st_mode & 0o077 == 0
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed: the unit was not verified by systemd")
    verified = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                              text=True, timeout=60, check=False)
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr.strip() == "", verified.stderr


def test_only_up_and_join_become_services(tmp_path: Path) -> None:
    done = install(tmp_path, "worker", "--region", "ams")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: install-service runs bodega up or bodega join, not 'worker'"]
    assert not (tmp_path / "units").exists()


# Stands for bodega under the unit: notes the signal that ends it (in the file it is given,
# beside a "ready" one once its handlers are set), then exits.
BODEGA = """
import signal, sys
from pathlib import Path
out = Path(sys.argv[1])
def ended(number, frame):
    out.write_text(signal.Signals(number).name)
    sys.exit(0)
signal.signal(signal.SIGINT, ended)
signal.signal(signal.SIGTERM, ended)
out.with_suffix(".ready").touch()
signal.pause()
"""


@pytest.mark.parametrize(("system", "expected"), [("running", "SIGTERM"),
                                                  ("degraded", "SIGTERM"),
                                                  ("stopping", "SIGINT")])
def test_the_units_stop_leaves_machines_unless_the_host_shuts_down(
        tmp_path: Path, system: str, expected: str) -> None:
    """The unit's ExecStop as systemd runs it (``$MAINPID`` set), with a ``systemctl`` that
    says what state the system is in: SIGTERM (bodega alone stops) unless it is stopping,
    then SIGINT (its machines stop too); it returns once bodega has ended."""
    stub = tmp_path / "bin" / "systemctl"
    stub.parent.mkdir()
    stub.write_text(f"#!/bin/sh\n[ \"$1\" = is-system-running ] && echo {system}\n")
    stub.chmod(0o755)
    said = tmp_path / "signal"
    bodega = subprocess.Popen([sys.executable, "-c", BODEGA, str(said)])
    try:
        until_sync(said.with_suffix(".ready").exists, "the stand-in's handlers set")
        stop = subprocess.Popen(["/bin/sh", "-c", STOP],
                                env={**os.environ, "MAINPID": str(bodega.pid),
                                     "PATH": f"{stub.parent}:{os.environ['PATH']}"})
        assert bodega.wait(timeout=30) == 0  # reaped here, as systemd reaps its main process
        assert stop.wait(timeout=30) == 0
    finally:
        bodega.kill()
        bodega.wait()
    assert said.read_text() == expected
