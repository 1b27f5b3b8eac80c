"""A membership node refuses a bad configuration before it binds anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.registry.membership import Membership, MembershipConfig, parse_seed
from tests.keyring_kit import KEYRING


@pytest.mark.parametrize(("field", "value"), [
    ("name", "wörker"), ("role", "scheduler"), ("seeds", ("no-port",)),
    ("seeds", ("host:99999",)), ("bind_host", "0.0.0.0"), ("meta", {"k": "v" * 600}),
])
def test_bad_configuration_is_refused(tmp_path: Path, field: str, value: object) -> None:
    values: dict[str, object] = {"name": "w1", "role": "worker", "region": "ams",
                                 "data_dir": tmp_path, "keyring": KEYRING}
    values[field] = value
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        Membership(MembershipConfig(**values))  # type: ignore[arg-type]


def test_a_wildcard_bind_is_fine_with_an_advertised_address(tmp_path: Path) -> None:
    config = MembershipConfig("w1", "worker", "ams", tmp_path, KEYRING, bind_host="0.0.0.0",
                              advertise_host="10.0.0.5")
    assert Membership(config).config.advertise_host == "10.0.0.5"


@pytest.mark.parametrize(("seed", "parsed"), [
    ("10.0.0.1:7946", ("10.0.0.1", 7946)), ("seed.internal:7946", ("seed.internal", 7946)),
    ("[::1]:7946", ("::1", 7946)),
])
def test_seeds_are_host_and_port(seed: str, parsed: tuple[str, int]) -> None:
    assert parse_seed(seed) == parsed
