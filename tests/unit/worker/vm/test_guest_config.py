"""The guest init's config, rendered by the worker, and what the init writes back."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

import bodega.worker.drivers.vm as vm_package
from bodega.worker.core.guest_files import GuestFile
from bodega.worker.drivers.oci.core.bundle import BundleError
from bodega.worker.drivers.vm.core.config import (
    CONFIG_BYTES,
    GuestConfig,
    GuestNetwork,
    config_disk,
    exit_code,
    guest_network,
)

NETWORK = GuestNetwork(mac="02:bd:00:01:02:05", addresses=("10.1.2.5/24", "fdaa::5/64"),
                       gateway4="10.1.2.1", gateway6="fdaa::1")


def sourced(text: str, then: str) -> str:
    """What a shell prints after sourcing ``text`` as the init does, then running ``then``."""
    return subprocess.run(["/bin/sh", "-c", f'eval "$1"; {then}', "sh", text],
                          capture_output=True, text=True, check=True).stdout


def test_the_config_is_quoted_literals_the_init_reads_back_as_given() -> None:
    config = GuestConfig(
        hostname="m1", argv=["/bin/sh", "-c", "echo $HOME; $(reboot)", "it's"],
        env={"SECRET": "a b'c\"$(id)", "bad-name": "dropped", "PATH": "/bin"},
        network=NETWORK, user=(1000, 100), workdir="/srv app", resolv_conf="nameserver x\n")
    text = config.render()
    assert sourced(text, 'printf "%s|" "$hostname" "$addresses" "$gateway4" "$gateway6" '
                         '"$uid" "$gid" "$workdir"') == \
        "m1|10.1.2.5/24 fdaa::5/64|10.1.2.1|fdaa::1|1000|100|/srv app|"
    assert sourced(text, 'printf "%s|" "$@"') == "/bin/sh|-c|echo $HOME; $(reboot)|it's|"
    # The machine's variables only in program_env's shell, never the init's own.
    assert sourced(text, 'printf "[%s]" "$SECRET"') == "[]"
    assert sourced(text, 'program_env; printf "[%s]" "$SECRET"') == "[a b'c\"$(id)]"
    assert "bad-name" not in text


def test_the_init_is_told_whether_it_has_a_swap_disk() -> None:
    plain = GuestConfig(hostname="m1", argv=["/bin/true"], env={}, network=NETWORK)
    assert sourced(plain.render(), 'printf "[%s]" "$swap"') == "[]"
    swapping = GuestConfig(hostname="m1", argv=["/bin/true"], env={}, network=NETWORK,
                           swap=True)
    assert sourced(swapping.render(), 'printf "[%s]" "$swap"') == "[1]"


def test_a_config_with_nothing_to_run_or_too_big_is_refused() -> None:
    with pytest.raises(BundleError, match="no entrypoint or cmd"):
        GuestConfig(hostname="m", argv=[], env={}, network=NETWORK).render()
    with pytest.raises(BundleError, match="bytes"):
        config_disk(GuestConfig(hostname="m", argv=["x"], env={"BIG": "x" * CONFIG_BYTES},
                                network=NETWORK))
    disk = config_disk(GuestConfig(hostname="m", argv=["x"], env={}, network=NETWORK))
    assert len(disk) == CONFIG_BYTES
    assert disk.rstrip(b"\0").endswith(b"}\n")


def test_a_volume_is_a_tag_and_a_path_and_a_path_the_init_cannot_split_is_refused() -> None:
    config = GuestConfig(hostname="m", argv=["x"], env={}, network=NETWORK,
                         volumes=[("vol0", "/data")])
    assert sourced(config.render(), 'printf "[%s]" "$volumes"') == "[vol0:/data]"
    for path in ("data", "/my data", "/a:b"):
        with pytest.raises(BundleError, match="absolute path"):
            GuestConfig(hostname="m", argv=["x"], env={}, network=NETWORK,
                        volumes=[("vol0", path)]).render()


@pytest.mark.parametrize(("status", "code"), [
    (b"exit=0\n" + b"\0" * 100, 0), (b"exit=143\n", 143), (b"exit=7\n\0", 7),
    (b"\0" * 4096, None), (b"exit=\n", None), (b"exit=12", None), (b"exit=1234\n", None),
])
def test_the_status_disk_says_the_programs_exit_code_or_nothing(status: bytes,
                                                                 code: int | None) -> None:
    assert exit_code(status) == code


def test_the_guest_network_is_the_namespaces_eth0() -> None:
    link = json.dumps([{"ifname": "eth0", "address": "02:bd:00:01:02:05", "addr_info": [
        {"family": "inet6", "local": "fdaa::5", "prefixlen": 64, "scope": "global"},
        {"family": "inet", "local": "10.1.2.5", "prefixlen": 24, "scope": "global"},
        {"family": "inet6", "local": "fe80::1", "prefixlen": 64, "scope": "link"}]}])
    routes4 = json.dumps([{"dst": "default", "gateway": "10.1.2.1", "dev": "eth0"}])
    routes6 = json.dumps([{"dst": "default", "gateway": "fdaa::1", "dev": "eth0"}])
    assert guest_network(link, routes4, routes6) == NETWORK
    assert guest_network(link, "[]", "").gateway4 == ""
    with pytest.raises(ValueError, match="no eth0"):
        guest_network("[]", "[]", "[]")


def test_the_init_writes_files_inside_the_root_and_drops_old_ones(tmp_path: Path) -> None:
    files = [GuestFile("/etc/app.conf", b"a 'quoted' $(x)\n\x00", 0o600),
             GuestFile("/var/run/pid file", b"7")]
    config = GuestConfig(hostname="m", argv=["x"], env={}, network=NETWORK, files=files,
                         dropped=["/etc/old.conf", "/gone", "/usr/etc"])
    # The init's own in_root and put_file, with its root at a directory of the test's.
    init = (Path(vm_package.__file__).parent / "init.sh").read_text()
    functions = init[init.index("in_root() {"):init.index("\nwrite_files\n")]
    root = tmp_path / "newroot"
    (root / "usr" / "etc").mkdir(parents=True)
    (root / "var").mkdir()
    os.symlink("/usr/etc", root / "etc")
    os.symlink("/run", root / "var" / "run")
    (root / "usr" / "etc" / "old.conf").write_text("an earlier boot's")
    script = ('fail() { echo "failed: $*"; exit 1; }\n'
              + functions.replace("/newroot", str(root)) + "\n" + config.render()
              + "write_files\n")
    ran = subprocess.run(["busybox", "sh", "-c", script], capture_output=True, text=True,
                         check=False)
    assert (ran.returncode, ran.stdout) == (0, ""), ran.stderr
    written = root / "usr" / "etc" / "app.conf"
    assert written.read_bytes() == b"a 'quoted' $(x)\n\x00"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert (root / "run" / "pid file").read_bytes() == b"7"
    assert stat.S_IMODE((root / "run" / "pid file").stat().st_mode) == 0o644
    # A file an earlier boot wrote is removed; a missing one or a directory is left.
    assert not (root / "usr" / "etc" / "old.conf").exists()
    assert (root / "usr" / "etc").is_dir()
