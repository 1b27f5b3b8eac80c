"""Where ``bodega up`` looks for fresh ports: next to the kernel's ephemeral range, never in it."""

from __future__ import annotations

from pathlib import Path

from bodega.cluster.port_claims import LINUX_EPHEMERAL, ephemeral_range, quiet_range


def test_fresh_ports_come_from_just_below_the_ephemeral_range() -> None:
    assert quiet_range((32768, 60999), span=8000) == range(24768, 32768)


def test_a_low_ephemeral_range_sends_them_above_it() -> None:
    assert quiet_range((5000, 50000), span=8000) == range(50001, 58001)


def test_an_ephemeral_range_that_fills_the_ports_leaves_the_kernel_to_choose() -> None:
    assert quiet_range((2000, 64000), span=8000) is None


def test_the_range_is_read_from_the_kernel_or_defaults_to_linux_s(tmp_path: Path) -> None:
    setting = tmp_path / "ip_local_port_range"
    setting.write_text("40000\t50000\n")
    assert ephemeral_range(setting) == (40000, 50000)
    setting.write_text("garbled")
    assert ephemeral_range(setting) == LINUX_EPHEMERAL
    assert ephemeral_range(tmp_path / "missing") == LINUX_EPHEMERAL
