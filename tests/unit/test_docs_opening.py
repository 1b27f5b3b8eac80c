"""README.md and ARCHITECTURE.md open by saying what a machine is: every kind a worker
runs, a process and an image in each isolation ``guest.isolation`` offers, not a
"processes today" that has not been true since images, sandboxes and VMs ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.model.machine_config import ISOLATIONS

ROOT = Path(__file__).resolve().parents[2]
# How the opening names each isolation; a new one must be named there too.
WORDS = {"container": "container", "sandbox": "gVisor sandbox", "vm": "micro-VM"}


def opening(name: str) -> str:
    """The first paragraph after the title, on one line."""
    text = (ROOT / name).read_text()
    body = text.split("\n\n", 2)[1]
    return " ".join(body.split())


@pytest.mark.parametrize("name", ["README.md", "ARCHITECTURE.md"])
def test_the_opening_names_every_kind_of_machine(name: str) -> None:
    assert set(WORDS) == set(ISOLATIONS)
    said = opening(name)
    assert "process" in said, said
    for word in WORDS.values():
        assert word in said, (word, said)
    assert "processes today" not in said, said
