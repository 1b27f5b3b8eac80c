"""The metrics store as a component: its scrape configuration, its place among the
components, and a cluster that runs without it when victoria-metrics is not installed."""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bodega.cli.daemons.metrics_store import metrics_choice
from bodega.cluster.components import components_for
from bodega.cluster.config import ClusterConfig
from bodega.cluster.metrics_store import (
    CONFIG,
    ScrapeTls,
    Scraping,
    StoreSettings,
    keep_certificate,
    renewed_dirs,
    scrape_config,
    scrape_tls,
    store_argv,
)
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import Identity, identity_of
from bodega.runtime.tls.files import CaDir, TlsDir


def test_the_scrape_config_discovers_both_kinds_at_the_broker(tmp_path: Path) -> None:
    tls = ScrapeTls(tmp_path / "ca.pem", tmp_path / "identity.pem")
    config = json.loads(scrape_config("https://127.0.0.1:4999", 2.0, tls))
    assert config["global"] == {"scrape_interval": "2s", "scrape_timeout": "2s"}
    cluster, apps = config["scrape_configs"]
    assert cluster["scheme"] == "https"
    assert cluster["honor_labels"] is True
    assert cluster["tls_config"]["cert_file"] == str(tls.identity_file)
    assert cluster["http_sd_configs"][0]["url"] == (
        "https://127.0.0.1:4999/v1/metrics/targets?kind=cluster")
    assert cluster["http_sd_configs"][0]["tls_config"]["ca_file"] == str(tls.ca_file)
    # An app's labels never win over the broker's: no org of its own choosing.
    assert apps["honor_labels"] is False
    assert "tls_config" not in apps
    assert "refresh_interval" not in apps["http_sd_configs"][0]  # a flag, not a key
    assert apps["http_sd_configs"][0]["url"].endswith("?kind=apps")
    assert apps["sample_limit"] == 10_000  # an app cannot fill the store


def test_without_tls_it_scrapes_plain_http() -> None:
    config = json.loads(scrape_config("http://127.0.0.1:1", 15.0, None))
    cluster = config["scrape_configs"][0]
    assert cluster["scheme"] == "http"
    assert "tls_config" not in cluster
    assert "tls_config" not in cluster["http_sd_configs"][0]


def test_the_store_listens_on_loopback_and_its_password_is_not_on_its_command_line(
        tmp_path: Path) -> None:
    argv = store_argv("victoria-metrics", 8428, StoreSettings(tmp_path, tmp_path / "b.json"))
    assert "-httpListenAddr=127.0.0.1:8428" in argv
    assert "-envflag.enable" in argv  # the password comes in its environment
    assert not any("password" in a.lower() for a in argv)


def test_the_store_starts_after_the_broker_and_the_broker_is_told_where_it_is(
        tmp_path: Path) -> None:
    config = ClusterConfig(data_dir=tmp_path, token="t", metrics_store=True,
                           metrics_interval=2.0)
    components = components_for(config)
    assert [c.role for c in components][-1] == "metrics-store"
    store = components[-1]
    assert store.tls_dir == tmp_path / "metrics" / "tls"
    assert "--broker-ready-file" in store.argv
    assert store.argv[store.argv.index("--broker-ready-file") + 1] == str(
        tmp_path / "run" / "broker.json")
    broker = next(c for c in components if c.role == "broker")
    assert broker.argv[broker.argv.index("--metrics-store") + 1] == str(tmp_path / "metrics")
    without = components_for(ClusterConfig(data_dir=tmp_path, token="t"))
    assert "metrics-store" not in [c.role for c in without]
    assert "--metrics-store" not in next(c for c in without if c.role == "broker").argv


def test_an_absent_binary_is_one_line_and_no_store(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing installed there
    assert metrics_choice(True, "15s") == (False, 15.0)
    said = capsys.readouterr().err.strip().splitlines()
    assert said == ["metrics: no store (victoria-metrics is not installed: apt-get install "
                    "victoria-metrics); the cluster runs without one"]
    assert metrics_choice(False, "2s") == (False, 2.0)
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="at least 1s"):
        metrics_choice(True, "100ms")


class Clock:
    """A clock that moves only when a wait asks it to; the third wait never ends."""

    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC)
        self.waits: list[float] = []

    def __call__(self) -> datetime.datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        if len(self.waits) > 2:
            await asyncio.Event().wait()
        self.now += datetime.timedelta(seconds=seconds)


async def test_the_store_renews_its_certificate_and_scrapes_with_the_new_one(
        tmp_path: Path) -> None:
    clock = Clock()
    authority = CertificateAuthority.ensure(CaDir(tmp_path / "tls"), "c1", lifetime=3600.0,
                                            clock=clock)
    tls = TlsDir(tmp_path / "metrics" / "tls")
    identity = Identity("c1", "metrics-store", "metrics")
    authority.issue(tls, identity, ("127.0.0.1",))
    settings = StoreSettings(tmp_path / "metrics", tmp_path / "broker.json", 1.0,
                             tls_dir=tls.path, ca_dir=tmp_path / "tls", cert_lifetime=3600.0)
    now = Scraping("https://127.0.0.1:1", scrape_tls(settings.tls_dir))
    _, before = tls.read_identity()
    due = (pki.renewal_wait(before, clock.now))
    keeper = asyncio.create_task(keep_certificate(settings, now, clock.sleep, clock))
    await until_true(lambda: len(clock.waits) == 3)  # renewed, and the old one removed
    keeper.cancel()
    assert 0 < due < 3600.0
    assert clock.waits[0] == pytest.approx(due)  # at two thirds of its life, not before
    (renewed,) = renewed_dirs(settings.data_dir)
    assert now.tls == ScrapeTls(TlsDir(renewed).ca_path, TlsDir(renewed).identity_path)
    _, after = TlsDir(renewed).read_identity()
    assert after.serial_number != before.serial_number
    assert identity_of(after) == identity
    # One key of the store's on disk: the supervisor's directory is gone once it is replaced.
    assert not tls.path.exists()
    assert [p.parent for p in settings.data_dir.rglob("identity.pem")] == [renewed]
    written = json.loads((settings.data_dir / CONFIG).read_text())
    assert written["scrape_configs"][0]["tls_config"]["cert_file"] == str(
        TlsDir(renewed).identity_path)


async def until_true(check: Callable[[], bool]) -> None:
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("never")
