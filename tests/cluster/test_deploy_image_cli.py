"""`bodega deploy` of examples/image-app: its Dockerfile built offline with buildah (a static
busybox, FROM scratch), pushed to the registry `bodega up` runs, tagged with the release
version, run by the oci driver and reached through the proxy."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.deploy_kit import EXAMPLES, Cli, readable_dir, until, up_cluster
from tests.integration.images.image_kit import BUSYBOX, needs_image_tools

pytestmark = [needs_image_tools,
              pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah")]


def image_app(apps: Path, app: str, page: str) -> Path:
    target = apps / app
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(EXAMPLES / "image-app", target)
    shutil.copy(BUSYBOX, target / "busybox")
    (target / "www" / "index.html").write_text(page)
    toml = target / "bodega.toml"
    toml.write_text(toml.read_text().replace('app = "image-app"', f'app = "{app}"', 1))
    return toml


async def serves(cli: Cli, app: str, page: str) -> bool:
    answer = await cli.get(app)
    return answer.status_code == 200 and answer.text == page


async def test_deploy_builds_the_dockerfile_pushes_it_and_serves_it(tmp_path: Path) -> None:
    app = "imgapp"
    built: list[str] = []
    async with up_cluster(tmp_path) as (cli, up):
        # No data dir is named: the deploy pushes to the registry the cluster names.
        (registry,) = [c["registry"] for c in up.state()["components"]
                       if c["role"] == "registry"]
        try:
            with readable_dir() as apps:
                await cli.ok("deploy", "-c", str(image_app(apps, app, "v1 page\n")))
                built.append(f"{registry}/{app}:v1")
                machines = await cli.machines(app)
                assert len(machines) == 2
                (v1,) = {m["config"]["image"] for m in machines}
                assert re.fullmatch(re.escape(built[0]) + "@sha256:[0-9a-f]{64}", v1), v1
                assert {m["state"] for m in machines} == {"started"}
                assert "init" not in machines[0]["config"]  # the image's entrypoint runs
                await until(lambda: serves(cli, app, "v1 page\n"))

                # A changed page is a new image, tagged with the next release, rolled out.
                await cli.ok("deploy", "-c", str(image_app(apps, app, "v2 page\n")))
                built.append(f"{registry}/{app}:v2")
                (v2,) = {m["config"]["image"] for m in await cli.machines(app)}
                assert v2.startswith(built[1] + "@sha256:"), v2  # pinned to what was pushed
                await until(lambda: serves(cli, app, "v2 page\n"))
                releases = await cli.json("releases", "--app", app)
                assert [(r["version"], r["image"]) for r in releases] == [
                    (2, v2), (1, v1)]

                # A [build] dockerfile that is not there: one line, nothing changes.
                broken = image_app(apps, app, "v3 page\n")
                broken.write_text(broken.read_text().replace(
                    'dockerfile = "Dockerfile"', 'dockerfile = "Missing.Dockerfile"'))
                code, _out, err = await cli.run("deploy", "-c", str(broken))
                assert code == 1
                assert err.strip().splitlines() == [
                    f"Error: [build] dockerfile: {broken.parent / 'Missing.Dockerfile'} "
                    "does not exist"]
                assert len(await cli.json("releases", "--app", app)) == 2
        finally:
            for reference in built:
                subprocess.run(["buildah", "rmi", "-f", reference], capture_output=True,
                               check=False)
