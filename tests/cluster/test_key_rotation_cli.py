"""`bodega cluster key list|rotate` on a real `bodega up`: the command a user types rotates
the gossip key on every component, the host's keyring file follows, and the cluster comes
back up on the new key after a restart."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from bodega.registry.sealing import keyfile
from tests.cluster.up_kit import UpProcess, free_port

# The members that seal gossip: the host's registry agent alone. Its workers, broker and
# proxy are its tenants (they speak no SWIM), so the key listing does not name them.
COMPONENTS = {"agent"}


async def bodega(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={k: v for k, v in os.environ.items()
                                             if not k.startswith(("BODEGA_", "FLY_"))})
    out, err = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def listing(api: list[str]) -> dict[str, object]:
    code, out, err = await bodega("cluster", "key", "list", "--json", *api)
    assert code == 0, err
    found: dict[str, object] = json.loads(out)
    return found


async def settled(api: list[str], key_id: str, timeout: float = 60.0) -> dict[str, object]:
    """The listing once every component reports holding ``key_id`` alone."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await listing(api)
        members = found["members"]
        assert isinstance(members, list)
        held = {m["name"]: (m["keys"], m["primary"], m["status"]) for m in members}
        if held == {n: ([key_id], key_id, "alive") for n in COMPONENTS}:
            return found
        assert asyncio.get_running_loop().time() < deadline, held
        await asyncio.sleep(0.5)


async def test_a_user_rotates_the_gossip_key_and_the_cluster_keeps_it(tmp_path: Path) -> None:
    data = tmp_path / ".bodega"
    api_port = free_port()
    args = ("--regions", "ams", "--workers-per-region", "2", "--worker-cpus", "1",
            "--worker-memory-mb", "512", "--driver", "null", "--api-port", str(api_port),
            "--proxy-port", str(free_port()), "--proxy-tls-port", "0",
            "--gossip-port", str(free_port()), "--registry-port", "0", "--log-level", "warning")
    up = await UpProcess(data, *args).start()
    try:
        await up.until_line("bodega is up")
        api = ["--api-url", f"http://127.0.0.1:{api_port}", "--token", up.token()]
        first = keyfile.read(data / "gossip-keyring")
        assert (data / "gossip-keyring").stat().st_mode & 0o777 == 0o600
        await settled(api, first.primary)

        code, out, err = await bodega("cluster", "key", "rotate", *api)
        assert code == 0, err
        assert f"removed: {first.primary}" in out
        new = out.split("gossip key ", 1)[1].split()[0]
        assert new != first.primary
        assert "KEY" in out
        assert "MEMBER" in out
        found = await settled(api, new)
        assert found["primary"] == new
        assert first.primary_key.encoded() not in json.dumps(found)
        assert keyfile.read(data / "gossip-keyring").ids == (new,)

        code, out, _ = await bodega("cluster", "key", "list", *api)
        assert code == 0
        assert new in out
        assert first.primary not in out
    finally:
        assert await up.stop() == 0

    # Started again on its data dir, every component starts from the rotated keyring.
    again = await UpProcess(data, *args).start()
    try:
        await again.until_line("bodega is up")
        api = ["--api-url", f"http://127.0.0.1:{api_port}", "--token", again.token()]
        await settled(api, new)
    finally:
        assert await again.stop() == 0


async def test_the_key_commands_say_in_one_line_what_went_wrong(tmp_path: Path) -> None:
    code, _out, err = await bodega("cluster", "key", "list", "--api-url",
                                  f"http://127.0.0.1:{free_port()}", "--token", "t")
    assert code == 1
    assert err.startswith("Error: cannot reach the bodega API at"), err
    assert "Traceback" not in err
