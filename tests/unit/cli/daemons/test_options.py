"""The flags every daemon shares are one flag: each launcher that takes one takes it with the
same help, environment variable, default and visibility (``cli/daemons/options.py``), so a
user reads the same line under ``bodega worker --help`` as under ``bodega broker --help``."""

from __future__ import annotations

from typing import Any

from bodega.cli.main import BodegaCommands

DAEMONS = ("worker", "broker", "proxy", "agent", "image-registry")
# Every flag at least two launchers take, as ``options.py`` declares it once.
SHARED = ("--tls-dir", "--internal-tls", "--secrets-key", "--certs-key", "--gossip-listen",
          "--join", "--gossip-keyring", "--registry-agent", "--ready-file", "--log-level",
          "--exit-with-parent")
# Flags spelt alike whose meaning is the daemon's own: where it keeps its state, its name,
# what it listens on, its region, which image registry and CA, its late binding, the CA it
# signs with and for how long, its admin tokens.
OWN = {"--data-dir", "--name", "--listen", "--region", "--image-registry",
       "--image-registry-ca", "--probe-ratio", "--ca-dir", "--cert-validity", "--token"}


def declared(command: Any) -> dict[str, tuple[object, ...]]:
    """Each option of ``command`` by its first name, with what a user sees of it."""
    return {p.opts[0]: (p.help, repr(p.envvar), repr(p.default), p.hidden, p.required,
                        tuple(p.opts), tuple(p.secondary_opts), p.multiple)
            for p in command.params}


def launchers() -> dict[str, dict[str, tuple[object, ...]]]:
    root = BodegaCommands(name="bodega")
    return {name: declared(root.load(name)) for name in (*DAEMONS, "up", "join")}


def test_up_and_join_take_the_daemons_log_level() -> None:
    found = launchers()
    assert found["up"]["--log-level"] == found["join"]["--log-level"] \
        == found["worker"]["--log-level"]


def test_a_flag_two_launchers_share_is_declared_alike_in_each() -> None:
    found = launchers()
    for flag in SHARED:
        takers = {name: found[name][flag] for name in DAEMONS if flag in found[name]}
        assert len(takers) >= 2, f"{flag} is shared by {sorted(takers)}"
        if flag == "--ready-file":
            takers.pop("image-registry")  # written once it answers: no url nor gossip
        assert len(set(takers.values())) == 1, f"{flag} differs between launchers: {takers}"


def test_every_flag_the_daemons_share_is_declared_once() -> None:
    """A flag two daemons take is in ``SHARED`` (one declaration) or ``OWN`` (theirs)."""
    found = launchers()
    counts: dict[str, int] = {}
    for name in DAEMONS:
        for flag in found[name]:
            counts[flag] = counts.get(flag, 0) + 1
    twice = {flag for flag, count in counts.items() if count >= 2}
    assert twice - set(SHARED) - OWN == set()
