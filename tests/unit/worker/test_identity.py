"""Each machine runs as a user of its own, derived from its address."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bodega.worker.host.core.identity import MACHINE_UID_BASE, machine_identity
from bodega.worker.ops.effects import machine_user

NOBODY = (65534, 65534)


def test_two_machines_never_share_a_user() -> None:
    first = machine_identity(NOBODY, "10.209.1.2")
    second = machine_identity(NOBODY, "10.209.1.3")
    other_worker = machine_identity(NOBODY, "10.209.2.2")
    assert len({first, second, other_worker}) == 3
    assert first == (MACHINE_UID_BASE + (209 << 16) + (1 << 8) + 2,) * 2


def test_the_same_address_gives_the_same_user_again() -> None:
    assert machine_identity(NOBODY, "10.209.1.2") == machine_identity(NOBODY, "10.209.1.2")


def test_without_an_address_of_its_own_the_configured_user_stays() -> None:
    for address in (None, "", "127.0.0.1", "0.0.0.0", "::1", "not an address"):
        assert machine_identity(NOBODY, address) == NOBODY


def test_a_worker_that_is_not_root_switches_no_user() -> None:
    assert machine_identity(None, "10.209.1.2") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker runs machines as users")
def test_a_user_namespace_that_denies_setgroups_refuses_machine_users(tmp_path: Path) -> None:
    """There the wrapper's unshare cannot drop the worker's groups, and every start would
    fail: the worker says so, in one line, and does not start."""
    setgroups = tmp_path / "setgroups"
    setgroups.write_text("allow\n")
    assert machine_user("nobody", setgroups) == NOBODY
    assert machine_user(None, setgroups) is None
    setgroups.write_text("deny\n")
    with pytest.raises(ValueError, match="denies setgroups"):
        machine_user("nobody", setgroups)
    assert machine_user(None, setgroups) is None  # no machine users asked for: nothing to refuse


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker runs machines as users")
def test_an_unshare_that_takes_no_user_refuses_machine_users(tmp_path: Path) -> None:
    """util-linux before 2.34: its unshare has no --setuid, so every start would fail."""
    allowed = tmp_path / "setgroups"
    allowed.write_text("allow\n")
    old = tmp_path / "unshare"
    old.write_text("#!/bin/sh\necho \"unshare: unrecognized option '$1'\" >&2\nexit 1\n")
    old.chmod(0o755)
    with pytest.raises(ValueError, match=r"cannot take a user \(unshare: unrecognized option "
                                         r"'--setuid=0'\); it needs util-linux 2.34"):
        machine_user("nobody", allowed, path=f"{tmp_path}:{os.defpath}")
    nowhere = tmp_path / "empty"
    nowhere.mkdir()
    with pytest.raises(ValueError, match="cannot take a user"):
        machine_user("nobody", allowed, path=str(nowhere))  # no unshare at all
    assert machine_user("nobody", allowed) == NOBODY  # this host's own unshare takes one
