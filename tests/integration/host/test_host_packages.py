"""`make up` and `make test` install the host packages they need, or stop in one line.

The check runs for real with a PATH that lacks a tool (a directory of links to
every host command but the stripped ones); nothing is uninstalled.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "host-packages"
HOST_BINS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def path_without(tmp_path: Path, *stripped: str) -> str:
    """A PATH holding every host command except ``stripped``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for directory in HOST_BINS:
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = bin_dir / entry.name
            if entry.name not in stripped and not target.exists():
                target.symlink_to(entry.path)
    return str(bin_dir)


def run(path: str, *prefix: str, script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, str(script)], capture_output=True, text=True, timeout=60,
                          env={"PATH": path, "LANG": "C"}, check=False)


def test_nothing_missing_means_nothing_said(tmp_path: Path) -> None:
    done = run(path_without(tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_missing_tool_without_apt_get_stops_in_one_line(tmp_path: Path) -> None:
    done = run(path_without(tmp_path, "nft", "apt-get"))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "Error: missing host package(s) nftables; install with: sudo apt-get install -y nftables"]


def test_each_package_is_named_once(tmp_path: Path) -> None:
    done = run(path_without(tmp_path, "nsenter", "unshare", "ip", "apt-get"))
    assert done.stderr.splitlines() == [
        "Error: missing host package(s) iproute2 util-linux; install with: sudo apt-get "
        "install -y iproute2 util-linux"]


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the check as another user")
def test_not_root_stops_in_one_line_even_with_apt_get() -> None:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    with tempfile.TemporaryDirectory() as where:  # pytest's tmp_path is closed to nobody
        os.chmod(where, 0o755)
        # A copy beside it: the checkout itself may sit where nobody cannot reach.
        script = Path(shutil.copy2(SCRIPT, Path(where) / SCRIPT.name))
        done = run(path_without(Path(where), "nft"), setpriv, "--reuid=nobody",
                   "--regid=nogroup", "--clear-groups", script=script)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "Error: missing host package(s) nftables; install with: sudo apt-get install -y nftables"]


@pytest.mark.skipif(os.geteuid() != 0, reason="installs only as root")
def test_root_updates_once_then_installs_what_is_missing(tmp_path: Path) -> None:
    # apt-get stands in here for the package manager (the test must not change the host):
    # it records its arguments and "installs" nft by linking the real one back onto PATH.
    path = path_without(tmp_path, "nft", "apt-get")
    calls = tmp_path / "calls"
    nft = shutil.which("nft")
    assert nft is not None
    fake = Path(path) / "apt-get"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                    f'case "$*" in *install*) ln -s {nft} {path}/nft ;; esac\n')
    fake.chmod(0o755)
    done = run(path)
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == [
        "update -qq", "install -y -qq --no-install-recommends nftables"]
    assert done.stderr.splitlines() == ["installing host package(s): nftables"]


@pytest.mark.skipif(os.geteuid() != 0, reason="installs only as root")
def test_an_install_that_leaves_the_tool_missing_is_an_error(tmp_path: Path) -> None:
    path = path_without(tmp_path, "nft", "apt-get")
    fake = Path(path) / "apt-get"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    done = run(path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith(
        "Error: host package(s) nftables installed but their commands are not on PATH")


def test_make_up_and_make_test_check_host_packages_first() -> None:
    for target, then in (("up", "bodega up"), ("test", "pytest")):
        plan = subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True,
                              text=True, timeout=60, check=True).stdout.splitlines()
        check = next(i for i, line in enumerate(plan) if "scripts/host-packages" in line)
        assert check < next(i for i, line in enumerate(plan) if then in line)
