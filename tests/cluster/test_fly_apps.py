"""Fly apps moved in unchanged: `bodega deploy` of fly.toml files as Fly users write them,
each with a small Dockerfile (a static busybox, FROM scratch), on a real `bodega up`.

- An old `[[services]]` file from flyctl's 2022 template (`processes = []`,
  `script_checks`, `restart_limit`, integer intervals, `[experimental] cmd`): it
  deploys, serves through the proxy, and a stop sends the program its `kill_signal`;
  its `[[files]]` (a raw value, an app secret) are in the machines' root.
- A file with two process groups, a mount for one, `[build.args]` and `build-target`:
  the image is built with the args and the target's stage, the http_service reaches only
  the group it names, each web machine mounts a volume of its own made by the deploy
  (`initial_size`), and a redeploy keeps those volumes.
- A file with `[[statics]]`: with every machine stopped, a file under the url_prefix is
  served through the proxy from the image and the machines stay stopped; any other path
  wakes one (autostart) as before.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.deploy_kit import Cli, concurrently, readable_dir, until, up_cluster
from tests.integration.images.image_kit import BUSYBOX, needs_image_tools

pytestmark = [needs_image_tools,
              pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah")]

OLD_TEMPLATE = """# fly.toml file generated for flyold on 2022-06-01T10:00:00Z

app = "flyold"
kill_signal = "SIGUSR1"
kill_timeout = 5
processes = []

[env]
  PORT = "8080"

[experimental]
  allowed_public_ports = []
  auto_rollback = true
  cmd = "/serve.sh"

[[services]]
  http_checks = []
  internal_port = 8080
  processes = ["app"]
  protocol = "tcp"
  script_checks = []

  [services.concurrency]
    hard_limit = 25
    soft_limit = 20
    type = "connections"

  [[services.ports]]
    handlers = ["http"]
    port = 80

  [[services.tcp_checks]]
    grace_period = "1s"
    interval = 2000
    restart_limit = 0
    timeout = 1000

[[files]]
  guest_path = "/www/motd.txt"
  raw_value = "from files"

[[files]]
  guest_path = "/www/secret.txt"
  secret_name = "PAGE_FILE"
"""

# The image's ENTRYPOINT is a shell; [experimental] cmd names the script it runs. The
# script ends with its own code for each signal, so the stop's exit says which came.
OLD_DOCKERFILE = """FROM scratch
COPY busybox /bin/busybox
COPY serve.sh /serve.sh
COPY www /www
ENTRYPOINT ["/bin/busybox", "sh"]
CMD ["-c", "exit 3"]
"""
SERVE = """/bin/busybox httpd -f -p 8080 -h /www & child=$!
trap 'kill $child; exit 42' USR1
trap 'kill $child; exit 43' INT
trap 'kill $child; exit 44' TERM
while kill -0 $child; do wait $child; done
"""

GROUPS = """app = "flygroups"

[build]
  dockerfile = "Dockerfile"
  build-target = "prod"

  [build.args]
    PAGE = "built with args"

[processes]
  web = "/bin/busybox sh /web.sh"
  worker = "/bin/busybox sh /worker.sh"

[http_service]
  internal_port = 8080
  processes = ["web"]
  auto_stop_machines = "off"
  min_machines_running = 1

[[mounts]]
  source = "webdata"
  destination = "/data"
  processes = ["web"]
  initial_size = "2gb"

[[vm]]
  memory = "256mb"
"""
# Built to its "prod" stage only: the stage after it copies a file that is not there.
GROUPS_DOCKERFILE = """FROM scratch AS prod
ARG PAGE=unset
ENV PAGE=$PAGE
COPY busybox /bin/busybox
COPY web.sh worker.sh /

FROM scratch AS never
COPY not-there /not-there
"""
WEB = """/bin/busybox mkdir -p /data/www
echo "$PAGE" > /data/www/index.html
/bin/busybox grep ' /data ' /proc/mounts > /data/www/mounts.txt
exec /bin/busybox httpd -f -p 8080 -h /data/www
"""
WORKER = "exec /bin/busybox sleep 100000\n"

STATICS = """app = "flystatic"

[http_service]
  internal_port = 8080
  auto_stop_machines = "stop"
  auto_start_machines = true
  min_machines_running = 0

[[statics]]
  guest_path = "/app/public"
  url_prefix = "/static/"
"""
# The machine's own httpd serves /www only: a file under /static can come from the edge alone.
STATICS_DOCKERFILE = """FROM scratch
COPY busybox /bin/busybox
COPY www /www
COPY public /app/public
ENTRYPOINT ["/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"]
"""
STYLE = "body { color: #c0ffee }\n" * 50


def app(apps: Path, name: str, files: dict[str, str]) -> Path:
    where = apps / name
    (where / "www").mkdir(parents=True)
    shutil.copy(BUSYBOX, where / "busybox")
    for path, text in files.items():
        (where / path).write_text(text)
    return where / "fly.toml"


async def exit_codes(cli: Cli, app_name: str, machine_id: str) -> list[int]:
    events = await cli.json("machine", "events", machine_id, "-a", app_name)
    return [e["request"]["exit_event"]["exit_code"] for e in events if e["type"] == "exit"]


async def old_template(cli: Cli, apps: Path) -> None:
    fly_toml = app(apps, "flyold", {"fly.toml": OLD_TEMPLATE, "Dockerfile": OLD_DOCKERFILE,
                                    "serve.sh": SERVE, "www/index.html": "old but gold\n"})
    # [[files]]' secret_name: the secret holds the file base64-encoded, as on Fly.
    await cli.ok("apps", "create", "flyold")
    await cli.ok("secrets", "set", "-a", "flyold", "--stage", "PAGE_FILE=ZnJvbSBhIHNlY3JldA==")
    code, out, err = await cli.run("deploy", "-c", str(fly_toml))
    assert code == 0, f"{out}\n{err}"
    assert "services.0.script_checks: unknown key" in err  # a warning, not a refusal
    machines = await cli.machines("flyold")
    assert len(machines) == 2
    config: dict[str, Any] = machines[0]["config"]
    assert config["stop_config"] == {"signal": "SIGUSR1", "timeout": "5s"}
    assert config["init"] == {"cmd": ["/serve.sh"]}
    assert config["services"][0]["checks"][0]["interval"] == "2s"
    await until(lambda: _serves(cli, "flyold", "/", "old but gold\n"))
    assert [await _serves(cli, "flyold", f"/{f}.txt", text) for f, text in (
        ("motd", "from files"), ("secret", "from a secret"))] == [True, True]
    stopped = machines[0]["id"]
    await cli.ok("machine", "stop", stopped, "-a", "flyold")
    await until(lambda: _exited(cli, "flyold", stopped))
    assert (await exit_codes(cli, "flyold", stopped))[0] == 42  # it got SIGUSR1


async def groups(cli: Cli, apps: Path) -> None:
    fly_toml = app(apps, "flygroups", {"fly.toml": GROUPS, "Dockerfile": GROUPS_DOCKERFILE,
                                       "web.sh": WEB, "worker.sh": WORKER})
    await cli.ok("deploy", "-c", str(fly_toml))
    machines = await cli.machines("flygroups")
    by_group: dict[str, list[dict[str, Any]]] = {}
    for machine in machines:
        by_group.setdefault(machine["config"]["metadata"]["fly_process_group"], []).append(
            machine)
    web, worker = by_group["web"], by_group["worker"]
    assert len(web) == 2
    assert all("services" not in m["config"] for m in worker)
    assert all("mounts" not in m["config"] for m in worker)
    assert {m["config"]["guest"]["memory_mb"] for m in machines} == {256}
    mounted = sorted(m["config"]["mounts"][0]["volume"] for m in web)
    assert all(v.startswith("vol_") for v in mounted), mounted
    volumes = await _volumes(cli, "flygroups")
    assert sorted(v["id"] for v in volumes) == mounted
    assert {(v["name"], v["size_gb"]) for v in volumes} == {("webdata", 2)}
    assert sorted(v["attached_machine_id"] for v in volumes) == sorted(m["id"] for m in web)
    await until(lambda: _serves(cli, "flygroups", "/", "built with args\n"))
    answer = await cli.get("flygroups", "/mounts.txt")
    assert " /data " in answer.text, answer.text

    # Unchanged, deployed again: nothing restarts, and no machine changes volume.
    await cli.ok("deploy", "-c", str(fly_toml))
    again = await cli.machines("flygroups")
    assert sorted(m["config"]["mounts"][0]["volume"] for m in again
                  if m["config"]["metadata"]["fly_process_group"] == "web") == mounted
    assert len(await _volumes(cli, "flygroups")) == 2


async def statics(cli: Cli, apps: Path) -> None:
    fly_toml = app(apps, "flystatic", {"fly.toml": STATICS, "Dockerfile": STATICS_DOCKERFILE,
                                       "www/index.html": "the machine itself\n"})
    (fly_toml.parent / "public" / "css").mkdir(parents=True)
    (fly_toml.parent / "public" / "css" / "site.css").write_text(STYLE)
    code, out, err = await cli.run("deploy", "-c", str(fly_toml))
    assert code == 0, f"{out}\n{err}"
    assert "statics" not in err, err  # acted on, not warned about
    machines = await cli.machines("flystatic")
    assert machines
    assert all(m["config"]["statics"] == [{"guest_path": "/app/public",
                                           "url_prefix": "/static/"}] for m in machines)
    await until(lambda: _serves(cli, "flystatic", "/", "the machine itself\n"))
    for machine in machines:
        await cli.ok("machine", "stop", machine["id"], "-a", "flystatic")
    await until(lambda: _all_stopped(cli, "flystatic"))

    answer = await cli.get("flystatic", "/static/css/site.css")
    assert answer.status_code == 200, answer.text
    assert answer.text == STYLE
    assert answer.headers["content-type"].startswith("text/css")
    assert (await cli.get("flystatic", "/static/css/none.css")).status_code == 404
    assert await _all_stopped(cli, "flystatic"), "a static woke a machine"

    await until(lambda: _serves(cli, "flystatic", "/", "the machine itself\n"))  # autostart
    assert not await _all_stopped(cli, "flystatic")


async def _all_stopped(cli: Cli, app_name: str) -> bool:
    return all(m["state"] == "stopped" for m in await cli.machines(app_name))


async def _volumes(cli: Cli, app_name: str) -> list[dict[str, Any]]:
    """The app's volumes, as the Machines API lists them."""
    async with httpx.AsyncClient(timeout=30, headers={
            "authorization": f"Bearer {cli.env['BODEGA_API_TOKEN']}"}) as api:
        answer = await api.get(f"{cli.env['BODEGA_API_URL']}/v1/apps/{app_name}/volumes")
        assert answer.status_code == 200, answer.text
        return list(answer.json())


async def _serves(cli: Cli, app_name: str, path: str, text: str) -> bool:
    answer = await cli.get(app_name, path)
    return answer.status_code == 200 and answer.text == text


async def _exited(cli: Cli, app_name: str, machine_id: str) -> bool:
    return bool(await exit_codes(cli, app_name, machine_id))


async def test_fly_apps_deploy_unchanged_and_their_keys_act(tmp_path: Path) -> None:
    async with up_cluster(tmp_path) as (cli, up):
        (registry,) = [c["registry"] for c in up.state()["components"]
                       if c["role"] == "registry"]
        with readable_dir() as apps:
            try:
                await concurrently(old_template=old_template(cli, apps),
                                   groups=groups(cli, apps), statics=statics(cli, apps))
            finally:
                for name, version in (("flyold", 1), ("flygroups", 1), ("flygroups", 2),
                                      ("flystatic", 1)):
                    subprocess.run(["buildah", "rmi", "-f", f"{registry}/{name}:v{version}"],
                                   capture_output=True, check=False)
