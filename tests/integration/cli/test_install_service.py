"""`bodega install-service` writes a unit systemd accepts: checked with `systemd-analyze
verify` where that binary is installed (only that check is skipped where it is not)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


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
