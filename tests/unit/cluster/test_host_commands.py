"""Which host commands `bodega up` and `bodega join` need, and the line that names the
missing ones with their packages."""

from __future__ import annotations

import re
from pathlib import Path

from bodega.cluster.host_commands import AS_ROOT, HostCommand, missing, needed, refusal

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "host-packages"


def on_path(*present: str) -> dict[str, str]:
    return {name: f"/usr/bin/{name}" for name in present}


def test_root_with_a_machine_driver_needs_them_all_and_nothing_else_does() -> None:
    for driver in ("auto", "process", "oci"):
        assert needed(driver, root=True) == AS_ROOT
        assert needed(driver, root=False) == ()
    assert needed("null", root=True) == ()


def test_the_missing_ones_are_named_with_the_packages_that_install_them() -> None:
    everything = on_path("ip", "nft", "nsenter", "unshare", "mount")
    assert missing(AS_ROOT, everything.get) == []
    assert refusal(missing(AS_ROOT, everything.get)) is None
    no_nft = {k: v for k, v in everything.items() if k != "nft"}
    assert refusal(missing(AS_ROOT, no_nft.get)) == (
        "nft is not installed: apt-get install nftables")
    # Two commands of one package name it once; the list reads as a sentence.
    assert refusal(missing(AS_ROOT, on_path("ip", "mount").get)) == (
        "nft, nsenter and unshare are not installed: apt-get install nftables util-linux")


def test_they_are_the_required_lines_of_scripts_host_packages() -> None:
    """`make` installs what the script lists; `bodega up` checks the same commands."""
    block = re.search(r"PACKAGES='\n(.*?)\n'", SCRIPT.read_text(), flags=re.DOTALL)
    assert block is not None
    required = [HostCommand(*words[:2]) for words in
                (line.split() for line in block.group(1).splitlines())
                if words and "optional" not in words[2:]]
    assert required == list(AS_ROOT)
