"""What the deploy CLI tests share: a real `bodega up`, the real `bodega` command, an app dir."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.poll_kit import until as poll_until
from tests.python_kit import machine_python

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Long enough that a program that exits at once, as the failing releases here do, is
# seen exiting by the smoke check even on a busy host.
SMOKE_CATCHES_AN_EXIT = ("--smoke-time", "3")


@dataclass
class Cli:
    env: dict[str, str]
    proxy: str

    async def run(self, *args: str, timeout: float = 240.0) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bodega", *args, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), timeout)
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()

    async def watch(self, *args: str, until: str,
                    timeout: float = 240.0) -> tuple[int, str, str, bool]:
        """Run, reading stdout as it is written: (code, out, err, whether a line containing
        ``until`` came while the command was still running)."""
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bodega", *args, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert process.stdout is not None
        assert process.stderr is not None
        errors = asyncio.create_task(process.stderr.read())
        lines: list[str] = []
        early = False
        async with asyncio.timeout(timeout):
            while line := (await process.stdout.readline()).decode():
                lines.append(line)
                if until in line and not early:
                    early = process.returncode is None
            code = await process.wait()
        return code, "".join(lines), (await errors).decode(), early

    async def ok(self, *args: str) -> str:
        code, out, err = await self.run(*args)
        assert code == 0, f"bodega {' '.join(args)} failed ({code}):\n{out}\n{err}"
        return out

    async def json(self, *args: str) -> Any:
        return json.loads(await self.ok(*args, "--json"))

    async def machines(self, app: str) -> list[dict[str, Any]]:
        return list(await self.json("machine", "list", "--app", app))

    async def get(self, app: str, path: str = "/") -> httpx.Response:
        async with httpx.AsyncClient(timeout=30) as web:
            return await web.get(self.proxy + path, headers={"host": f"{app}.localhost"})


@contextlib.asynccontextmanager
async def up_cluster(tmp: Path, workers: int = 2, extra: tuple[str, ...] = ()
                     ) -> AsyncIterator[tuple[Cli, UpProcess]]:
    """A real ``bodega up`` (one region, ``workers`` workers, ``extra`` flags) and a CLI
    pointed at it."""
    api, proxy, registry = free_port(), free_port(), free_port()
    cidr = machine_cidr(140, 200)
    # A registry port of its own: the default (5050) may be another cluster's.
    up = UpProcess(tmp / "cluster", "--regions", "ams", "--workers-per-region", str(workers),
                   "--worker-cpus", "8", "--worker-memory-mb", "4096", "--api-port", str(api),
                   "--proxy-port", str(proxy),
                   "--proxy-tls-port", str(free_port()), "--machine-cidr", cidr,
                   "--token", "deploy-token",
                   "--registry-port", str(registry), *extra)
    await up.start()
    try:
        await up.until_line("bodega is up", timeout=120)
        # The default 10 s smoke check per machine would add minutes to the suite: a
        # release that should run gets 1 s, one that must be caught exiting at once
        # passes SMOKE_CATCHES_AN_EXIT.
        env = {**os.environ, "BODEGA_API_URL": f"http://127.0.0.1:{api}",
               "BODEGA_API_TOKEN": "deploy-token", "BODEGA_SMOKE_TIME": "1"}
        yield Cli(env=env, proxy=f"http://127.0.0.1:{proxy}"), up
    finally:
        await up.end()
        await unwire(tmp / "cluster")


@contextlib.contextmanager
def readable_dir() -> Iterator[Path]:
    """A directory the machines' unprivileged user can read (pytest's tmp_path is root's
    alone), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="bodega-deploy-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def app_dir(tmp: Path, example: str, app: str, **replace: str) -> Path:
    """A copy of an example, its app renamed and ``replace`` applied to its bodega.toml."""
    target = tmp / f"{app}-{len(list(tmp.iterdir()))}"
    shutil.copytree(EXAMPLES / example, target)
    toml = target / "bodega.toml"
    text = toml.read_text()
    text = text.replace(f'app = "{"hello" if example == "hello" else "ticker"}"',
                        f'app = "{app}"', 1)
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    text = text.replace('"python3 ', f'"{machine_python()} ')
    toml.write_text(text)
    return toml


def releases_of(machines: list[dict[str, Any]]) -> list[str]:
    return sorted(m["config"]["metadata"]["fly_release_version"] for m in machines)


async def concurrently(**scenarios: Coroutine[Any, Any, None]) -> None:
    """Run independent scenarios, each on its own app, at once: most of a deploy is waiting
    (smoke, drain, checks), and one cluster serves them all. A failure names its scenario."""
    results = await asyncio.gather(*scenarios.values(), return_exceptions=True)
    failed = [(name, result) for name, result in zip(scenarios, results, strict=True)
              if isinstance(result, BaseException)]
    if failed:
        (name, error), *others = failed
        also = "".join(f"; {other} failed too: {exc!r}" for other, exc in others)
        raise AssertionError(f"scenario {name} failed: {error!r}{also}") from error


until = partial(poll_until, timeout=90.0, every=0.3)


async def load(cli: Cli, app: str, stop: asyncio.Event) -> tuple[int, list[str]]:
    """Requests one after another through the proxy until ``stop``: (count, failures)."""
    count, failures = 0, []
    async with httpx.AsyncClient(timeout=30) as web:
        while not stop.is_set():
            try:
                answer = await web.get(cli.proxy + "/", headers={"host": f"{app}.localhost"})
                if answer.status_code != 200:
                    failures.append(f"{answer.status_code} {answer.text[:100]}")
            except httpx.HTTPError as exc:
                failures.append(repr(exc))
            count += 1
            await asyncio.sleep(0.02)
    return count, failures
