"""An app's network: named like an app, fixed at creation, never confusable with another's."""

from __future__ import annotations

import itertools

import pytest

from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.errors import BadRequest, Unprocessable
from bodega.networking.core.sixpn import network_field


def test_an_app_joins_the_network_asked_for_or_its_organizations() -> None:
    apps = Apps(MemoryCatalog())
    assert apps.create("web", "personal", None).network == "default"
    assert apps.create("db", "personal", "blue").network == "blue"
    assert apps.answer(apps.require("db"), 0, 0, "deployed").network == "blue"


def test_a_network_name_that_is_no_dns_label_is_refused() -> None:
    apps = Apps(MemoryCatalog())
    with pytest.raises(BadRequest, match="network 'Blue Net'"):
        apps.create("web", "personal", "Blue Net")
    assert apps.names() == []


def test_a_network_whose_addresses_clash_with_an_existing_one_is_refused() -> None:
    apps = Apps(MemoryCatalog())
    apps.create("web", "personal", None)
    taken = network_field("personal/default")
    clash = next(name for name in (f"n{i}" for i in itertools.count())
                 if network_field(f"personal/{name}") == taken)
    with pytest.raises(Unprocessable, match="cannot be told apart"):
        apps.create("db", "personal", clash)
    assert apps.names() == ["web"]
    apps.create("api", "personal", "default")  # the same network again is no clash
