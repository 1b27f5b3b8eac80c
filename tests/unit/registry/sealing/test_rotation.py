"""A key rotation's three steps and who has not taken each."""

from __future__ import annotations

import pytest

from bodega.registry.membership.core.lagging import lagging
from bodega.registry.membership.core.members import MemberView, Role, Status
from bodega.registry.sealing.core.keyring import GossipKey, Keyring
from bodega.registry.sealing.core.rotation import StepName, rotation_steps

OLD, NEW = GossipKey(b"\1" * 32), GossipKey(b"\2" * 32)


def member(name: str, report: str | None, status: Status = Status.ALIVE) -> MemberView:
    meta = {"url": f"http://{name}"} | ({"keys": report} if report is not None else {})
    return MemberView(name, ("127.0.0.1", 1), Role.WORKER, "ams", meta, status, 1, 1)


def test_install_then_use_then_remove() -> None:
    install, use, remove = rotation_steps(Keyring.of(OLD), NEW)
    assert [s.name for s in (install, use, remove)] == [StepName.INSTALL, StepName.USE,
                                                          StepName.REMOVE]
    assert (install.keyring.ids, install.keyring.primary) == ((OLD.id, NEW.id), OLD.id)
    assert (use.keyring.ids, use.keyring.primary) == ((OLD.id, NEW.id), NEW.id)
    assert (remove.keyring.ids, remove.keyring.primary) == ((NEW.id,), NEW.id)
    assert install.keyring.serial < use.keyring.serial < remove.keyring.serial


def test_a_rotation_cut_short_before_is_cleaned_up_by_the_next() -> None:
    leftover = GossipKey(b"\3" * 32)
    current = Keyring.of(OLD).install(leftover)  # an earlier rotation stopped after install
    remove = rotation_steps(current, NEW)[-1]
    assert remove.keyring.ids == (NEW.id,)


def test_a_key_already_installed_is_not_rotated_to() -> None:
    with pytest.raises(ValueError, match="already installed"):
        rotation_steps(Keyring.of(OLD), OLD)


def test_lagging_names_live_members_that_have_not_taken_the_step() -> None:
    install, use, remove = rotation_steps(Keyring.of(OLD), NEW)
    both = f"{OLD.id}*,{NEW.id}"
    members = [
        member("has-it", both),
        member("seals-new", f"{OLD.id},{NEW.id}*"),
        member("old-only", f"{OLD.id}*"),
        member("silent", None),  # reports nothing: never done
        member("suspect", f"{OLD.id}*", Status.SUSPECT),  # may be alive: waited for
        member("dead", f"{OLD.id}*", Status.DEAD),  # not waited for
        member("left", None, Status.LEFT),
    ]
    assert lagging(members, install) == ["old-only", "silent", "suspect"]
    assert lagging(members, use) == ["has-it", "old-only", "silent", "suspect"]
    assert lagging(members, remove) == ["has-it", "old-only", "seals-new", "silent",
                                        "suspect"]
    assert lagging([member("done", f"{NEW.id}*")], remove) == []
