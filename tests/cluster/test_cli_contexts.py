"""Two real `bodega up` clusters and the real `bodega` command: each cluster is one context
(API URL, token, registry), a token only goes where it belongs, and what goes wrong is one
line naming the API.

The clusters run from ``.bodega`` and ``.bodega2`` under one directory, as a user starts
them, with their own API, proxy and registry ports and no machines (null driver); the
CLI runs in that directory, where ``.bodega`` is the data dir it would fall back to.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx

from tests.cluster.up_kit import UpProcess, free_port

CHOICE_VARIABLES = ("BODEGA_API_URL", "BODEGA_API_TOKEN", "FLY_API_TOKEN", "BODEGA_CONTEXT",
                    "BODEGA_DATA_DIR")
# 60 characters: its status line ("<app>: release none yet") is past 80 columns.
LONG_APP = "status-of-an-app-whose-name-is-long-enough-to-pass-80-column"


def small(api: int, proxy: int, registry: int) -> tuple[str, ...]:
    return ("--regions", "ams", "--workers-per-region", "1", "--worker-cpus", "1",
            "--worker-memory-mb", "512", "--driver", "null", "--api-port", str(api),
            "--proxy-port", str(proxy),
            "--proxy-tls-port", str(free_port()), "--registry-port", str(registry),
            "--log-level", "warning")


class User:
    """The `bodega` command as a user types it in ``home`` (no API variables exported)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    async def run(self, *args: str, **env: str) -> tuple[int, str, str]:
        base = {k: v for k, v in os.environ.items() if k not in CHOICE_VARIABLES}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bodega", *args, cwd=self.home, env={**base, **env},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()

    async def ok(self, *args: str, **env: str) -> str:
        code, out, err = await self.run(*args, **env)
        assert code == 0, f"bodega {' '.join(args)} failed ({code}):\n{out}\n{err}"
        return out

    async def apps(self, *args: str, **env: str) -> list[str]:
        return sorted(a["name"] for a in json.loads(await self.ok("apps", "list", "--json",
                                                                  *args, **env)))

    async def error(self, *args: str, **env: str) -> str:
        """The one line a failing command prints."""
        code, out, err = await self.run(*args, **env)
        assert code == 1, f"bodega {' '.join(args)}: {code}\n{out}\n{err}"
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("Error: ")
        return lines[0].removeprefix("Error: ")


def registry_of(up: UpProcess) -> str:
    (found,) = [c["registry"] for c in up.state()["components"] if c["role"] == "registry"]
    return str(found)


async def catalog(up: UpProcess) -> list[str]:
    """The repositories in the cluster's registry (HTTPS from its CA; its admin token)."""
    async with httpx.AsyncClient(verify=ssl.create_default_context(
            cafile=up.data_dir / "ca.crt")) as http:
        answer = await http.get(f"https://{registry_of(up)}/v2/_catalog",
                                auth=("bodega", up.token()))
        return list(answer.json()["repositories"] or [])


async def test_each_cluster_is_one_context_and_tokens_go_only_where_they_belong(
        tmp_path: Path, contexts_file: Path) -> None:
    api_a, api_b = free_port(), free_port()
    a, b = f"http://127.0.0.1:{api_a}", f"http://127.0.0.1:{api_b}"
    one = UpProcess(tmp_path / ".bodega", *small(api_a, free_port(), free_port()))
    two = UpProcess(tmp_path / ".bodega2", *small(api_b, free_port(), free_port()))
    user = User(tmp_path)
    try:
        await one.start()
        first = await one.until_line("CLI context:")  # its banner's, once it is up
        await two.start()
        second = await two.until_line("CLI context:")
        # Each `bodega up` kept its cluster; the first one up is current, the second says
        # how to reach it.
        assert first.startswith(f"CLI context: local, the current one (kept in {contexts_file})")
        assert second == (f"CLI context: bodega2 (kept in {contexts_file}); the current one is "
                          "local: reach this cluster with `bodega apps list --context bodega2`, "
                          "or `bodega context use bodega2`")
        kept = tomllib.loads(contexts_file.read_text())
        assert kept["current-context"] == "local"
        assert kept["contexts"]["bodega2"] == {
            "api_url": b, "token_file": str(tmp_path / ".bodega2" / "api-token"),
            "data_dir": str(tmp_path / ".bodega2")}
        assert contexts_file.stat().st_mode & 0o777 == 0o600

        await user.ok("apps", "create", "only-a")
        await user.ok("apps", "create", "only-b", "--context", "bodega2")
        assert await user.apps() == ["only-a"]
        assert await user.apps("--context", "bodega2") == ["only-b"]
        assert await user.apps(BODEGA_CONTEXT="bodega2") == ["only-b"]
        # --api-url alone takes the token kept for that URL.
        assert await user.apps("--api-url", b) == ["only-b"]
        unknown = f"http://127.0.0.1:{free_port()}"
        assert await user.error("apps", "list", "--api-url", unknown) == (
            f"no token for {unknown}: no context is for that API URL; the cluster in .bodega "
            f"is at {a} (tokens are only sent where they belong); pass --token, or keep one: "
            f"`bodega context add NAME --api-url {unknown} --token-file FILE`")

        # Without contexts, .bodega's token goes only to the API its cluster.json names.
        bare = {"BODEGA_CONFIG": str(tmp_path / "no-contexts.toml")}
        assert await user.apps(**bare) == ["only-a"]
        assert await user.apps("--api-url", a, **bare) == ["only-a"]
        assert (await user.error("apps", "list", "--api-url", b, **bare)).startswith(
            f"no token for {b}: no context is for that API URL; the cluster in .bodega is at "
            f"{a} ")

        # The first cluster's token sent to the second is named as such.
        assert await user.error("apps", "list", "--api-url", b,
                                BODEGA_API_TOKEN=one.token()) == (
            f"unauthorized at {b}: the token from BODEGA_API_TOKEN belongs to {a} (context "
            "'local'); unset BODEGA_API_TOKEN and use --context bodega2")

        # Each cluster names its own registry; build and deploy push there.
        shown = json.loads(await user.ok("context", "show", "--context", "bodega2", "--json"))
        assert shown == {"context": "bodega2", "api_url": b, "chosen_by": "--context bodega2",
                         "token_from": "context 'bodega2' (.bodega2/api-token)",
                         "registry": registry_of(two),
                         "registry_from": "the cluster (GET /v1/cluster)",
                         "file": str(contexts_file)}
        shown = json.loads(await user.ok("context", "show", "--json"))
        assert (shown["context"], shown["registry"]) == ("local", registry_of(one))
        if shutil.which("buildah") is not None:
            await build_goes_to_the_second_registry(user, tmp_path, one, two)

        # Piped, a long line stays one line.
        await user.ok("apps", "create", LONG_APP)
        out = await user.ok("status", "-a", LONG_APP)
        assert out.splitlines()[0] == f"{LONG_APP}: release none yet"
    finally:
        codes = await asyncio.gather(one.stop(), two.stop())
    assert list(codes) == [0, 0], one.output + "\n" + two.output

    # A cluster that is down: one line naming its API, no library internals.
    assert await user.error("apps", "list", "--context", "bodega2") == (
        f"cannot reach the bodega API at {b} (connection refused); is `bodega up` running?")


async def build_goes_to_the_second_registry(user: User, home: Path, one: UpProcess,
                                            two: UpProcess) -> None:
    source = home / "image"
    source.mkdir()
    (source / "Dockerfile").write_text("FROM scratch\nCOPY hello.txt /hello.txt\n")
    (source / "hello.txt").write_text("hello\n")
    reference = f"{registry_of(two)}/ctx-probe:v1"
    try:
        out = await user.ok("build", str(source), "-t", "ctx-probe:v1", "--context", "bodega2")
        assert out.splitlines() == [reference]
        assert "ctx-probe" in await catalog(two)
        assert "ctx-probe" not in await catalog(one)
    finally:
        subprocess.run(["buildah", "rmi", "-f", reference], capture_output=True, check=False)
