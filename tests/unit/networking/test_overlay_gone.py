"""When the overlay counts as gone (to be brought up again), from what was seen of it."""

from __future__ import annotations

from bodega.networking.overlay import Sight, gone

UNREACHABLE = "wg show bwgx dump failed: Unable to access interface: Protocol error"


def test_an_overlay_without_its_interface_is_gone() -> None:
    for userspace in (True, False):
        assert gone(Sight(interface=False, socket=False, userspace=userspace,
                          error=UNREACHABLE)) == "its interface is gone"


def test_a_userspace_overlay_without_its_control_socket_is_gone() -> None:
    assert gone(Sight(interface=True, socket=False, userspace=True, error="")) == \
        "its wireguard-go is gone (no control socket)"


def test_a_kernel_overlay_needs_no_socket() -> None:
    assert gone(Sight(interface=True, socket=False, userspace=False, error="")) is None


def test_an_interface_wg_cannot_reach_is_gone() -> None:
    assert gone(Sight(interface=True, socket=True, userspace=True, error=UNREACHABLE)) == \
        "wg cannot reach it (Protocol error)"


def test_a_wireguard_go_that_does_not_answer_is_left_alone() -> None:
    error = "wg show bwgx dump did not answer within 10 s"
    assert gone(Sight(interface=True, socket=True, userspace=True, error=error)) is None
