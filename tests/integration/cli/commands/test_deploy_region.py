"""A deploy names a region the cluster has, whether it makes the app or redeploys it:
``primary_region`` is checked before anything changes, not only where the deploy creates
machines (a redeploy that only updates creates none). The real ``bodega deploy`` against
a real broker (in-process workers, null driver)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.broker.broker_kit import in_process_cluster

from .test_app_commands import bodega

CONFIG = 'app = "{app}"\nprimary_region = "{region}"\n\n[processes]\n  worker = "sleep 600"\n'
REFUSED = ("Error: invalid_argument: region xyz has no workers in this cluster; "
           "its region is ams")


async def test_a_redeploy_to_a_region_the_cluster_lacks_is_refused(tmp_path: Path) -> None:
    here = tmp_path / "app"
    here.mkdir()
    toml = here / "bodega.toml"
    async with in_process_cluster(tmp_path / "cluster") as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2")
        await c.add_broker()
        c.follow()
        url = c.brokers[0].url
        toml.write_text(CONFIG.format(app="kept", region="xyz"))
        code, _out, err = await bodega(url, "deploy", "-c", str(toml), "--smoke-time", "0")
        assert (code, err.strip().splitlines()) == (1, [REFUSED]), err  # a new app

        toml.write_text(CONFIG.format(app="kept", region="ams"))
        code, _out, err = await bodega(url, "deploy", "-c", str(toml), "--smoke-time", "0")
        assert code == 0, err
        code, releases, err = await bodega(url, "releases", "-a", "kept", "--json")
        assert code == 0, err

        toml.write_text(CONFIG.format(app="kept", region="xyz"))
        code, _out, err = await bodega(url, "deploy", "-c", str(toml), "--smoke-time", "0")
        assert (code, err.strip().splitlines()) == (1, [REFUSED]), err  # the same app again
        code, after, err = await bodega(url, "releases", "-a", "kept", "--json")
        assert (code, after) == (0, releases), "a refused redeploy recorded a release"
