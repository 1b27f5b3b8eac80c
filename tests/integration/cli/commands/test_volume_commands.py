"""``bodega volumes ...`` run as a user runs them, against a real broker and workers
(in-process, null driver): create, list, show, extend, snapshot, fork and destroy a
volume, and the API's refusals as one line."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import sys
from pathlib import Path
from typing import Any

from tests.integration.broker.broker_kit import ADMIN, in_process_cluster, machine


async def bodega(url: str, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """The command's exit code, output and errors; no terminal on its standard input."""
    env = {k: v for k, v in os.environ.items() if k != "BODEGA_APP"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, "--api-url", url, "--token", ADMIN, cwd=cwd,
        env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def answer(url: str, *args: str) -> Any:
    """What a ``--json`` command printed, read back; it must have succeeded."""
    code, out, err = await bodega(url, *args, "--json")
    assert (code, err) == (0, ""), (args, out, err)
    return json.loads(out)


def fields(out: str) -> dict[str, str]:
    """``show``'s lines ("Size GB:  3") as label -> value."""
    found = {}
    for line in out.splitlines():
        label, sep, value = line.partition(":")
        if sep:
            found[label] = value.strip()
    return found


def rows(out: str) -> list[list[str]]:
    """A table's lines after its header, as words (no cell here holds a space)."""
    return [line.split() for line in out.splitlines()[1:] if line.strip()]


async def test_a_volume_from_create_to_destroy(tmp_path: Path) -> None:
    here = tmp_path / "web-app"
    here.mkdir()
    (here / "bodega.toml").write_text('app = "web"\n')
    async with in_process_cluster(tmp_path / "cluster") as c:
        await c.add_worker("ams-1", region="ams")
        await c.add_worker("syd-1", region="syd")
        await c.add_broker()  # its default region is ams
        c.follow()
        url = c.brokers[0].url
        async with c.api() as api:
            made = await api.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
            assert made.status_code == 201, made.text

        # create: the app from the bodega.toml where it runs.
        code, out, err = await bodega(url, "volumes", "create", "data", "-r", "syd", cwd=here)
        assert (code, err) == (0, ""), err
        shown = fields(out)
        volume = shown["ID"]
        assert volume.startswith("vol_")
        assert (shown["Name"], shown["App"], shown["Region"], shown["Zone"],
                shown["Size GB"]) == ("data", "web", "syd", "syd-1", "1")

        code, out, err = await bodega(url, "volumes", "list", "-a", "web")
        assert code == 0, err
        assert out.splitlines()[0].split() == ["ID", "STATE", "NAME", "SIZE", "REGION",
                                               "ZONE", "ENCRYPTED", "ATTACHED", "VM",
                                               "CREATED", "AT"]
        (row,) = rows(out)
        assert row[:7] == [volume, "created", "data", "1GB", "syd", "syd-1", "true"]
        listed = await answer(url, "volumes", "list", "-a", "web")
        assert [(v["id"], v["size_gb"]) for v in listed] == [(volume, 1)]

        shown = fields((await bodega(url, "volumes", "show", volume, "-a", "web"))[1])
        assert (shown["ID"], shown["State"], shown["Size GB"]) == (volume, "created", "1")
        assert (await answer(url, "volumes", "show", volume, "-a", "web"))["id"] == volume

        # extend: to a size, or by some more; nothing mounts it, so no restart.
        extended = await answer(url, "volumes", "extend", volume, "-a", "web", "--size", "+2")
        assert (extended["volume"]["size_gb"], extended["needs_restart"]) == (3, False)
        code, out, err = await bodega(url, "volumes", "extend", volume, "-a", "web", "-s", "4")
        assert code == 0, err
        assert fields(out)["Size GB"] == "4"
        assert out.splitlines()[-1] == "No machine needs a restart: the new size is there now"
        code, out, err = await bodega(url, "volumes", "extend", volume, "-a", "web", "-s", "2")
        assert (code, err.splitlines()) == (1, [
            f"Error: volumes only grow: {volume} is already 4 GB"])

        # snapshots: none, then one taken and listed.
        code, out, err = await bodega(url, "volumes", "snapshots", "list", volume, "-a", "web")
        assert (code, out, err) == (0, "", f"No snapshots of volume {volume}\n")
        code, out, err = await bodega(url, "volumes", "snapshots", "create", volume,
                                      "-a", "web")
        assert code == 0, err
        snapshot = out.split()[2]
        assert snapshot.startswith("vs_"), out
        code, out, err = await bodega(url, "volumes", "snapshots", "list", volume, "-a", "web")
        assert code == 0, err
        assert out.splitlines()[0].split()[:3] == ["ID", "STATUS", "STORED"]
        assert [r[:2] for r in rows(out)[:-1]] == [[snapshot, "created"]]
        assert out.splitlines()[-1].startswith("Total stored size: ")
        (taken,) = await answer(url, "volumes", "snapshots", "list", volume, "-a", "web")
        assert (taken["id"], taken["volume_size"]) == (snapshot, 4)

        # A volume made from the snapshot is the snapshot's size unless told otherwise.
        restored = await answer(url, "volumes", "create", "restored", "-a", "web",
                                "--snapshot-id", snapshot)
        assert (restored["name"], restored["size_gb"], restored["zone"]) == (
            "restored", 4, "syd-1")

        # fork: a second volume with the source's name, size and region (not the
        # broker's default region: the data is on the source's host, in syd).
        forked = await answer(url, "volumes", "fork", volume, "-a", "web")
        assert forked["id"] not in (volume, "")
        assert (forked["name"], forked["size_gb"], forked["region"], forked["zone"]) == (
            "data", 4, "syd", "syd-1")
        named = await answer(url, "volumes", "fork", volume, "-a", "web", "--name", "copy")
        assert named["name"] == "copy"
        listed = await answer(url, "volumes", "list", "-a", "web")
        assert [v["id"] for v in listed] == [volume, restored["id"], forked["id"], named["id"]]

        # A volume a machine mounts: extending it says to restart the machine, and the
        # API refuses to destroy it, in one line.
        async with c.api() as api:
            started = await api.post("/v1/apps/web/machines", json=machine(
                config={"mounts": [{"volume": volume, "path": "/data"}]}))
            assert started.status_code == 200, started.text
            machine_id = started.json()["id"]
        shown = fields((await bodega(url, "volumes", "show", volume, "-a", "web"))[1])
        assert shown["Attached VM"] == machine_id
        code, out, err = await bodega(url, "volumes", "extend", volume, "-a", "web", "-s", "5")
        assert code == 0, err
        assert out.splitlines()[-1] == (
            f"Machine {machine_id} mounts this volume: restart it (`bodega machine restart "
            f"{machine_id} -a web`) for its file system to see the new size")
        code, out, err = await bodega(url, "volumes", "destroy", volume, "-a", "web", "--yes")
        assert (code, err.splitlines()) == (1, [
            f"Error: failed_precondition: volume {volume} is attached to machine "
            f"{machine_id}; destroy the machine first"])
        # Without --yes and without a terminal to ask on, nothing is destroyed.
        code, out, err = await bodega(url, "volumes", "destroy", forked["id"], "-a", "web")
        assert (code, err.splitlines()) == (1, [
            "Error: destroying a volume deletes its data: pass --yes to confirm (there is "
            "no terminal to ask on)"])
        assert fields((await bodega(url, "volumes", "show", forked["id"], "-a", "web"))[1]
                      )["State"] == "created"

        async with c.api() as api:
            gone = await api.delete(f"/v1/apps/web/machines/{machine_id}",
                                    params={"force": "true"})
            assert gone.status_code == 200, gone.text
            waited = await api.get(f"/v1/apps/web/machines/{machine_id}/wait",
                                   params={"state": "destroyed", "timeout": 30})
            assert waited.status_code == 200, waited.text
        copies = [restored["id"], forked["id"], named["id"]]
        code, out, err = await bodega(url, "volumes", "destroy", volume, *copies,
                                      "-a", "web", "--yes")
        assert (code, err) == (0, ""), err
        assert out.splitlines() == [f"Destroyed volume {volume} (data)",
                                    f"Destroyed volume {restored['id']} (restored)",
                                    f"Destroyed volume {forked['id']} (data)",
                                    f"Destroyed volume {named['id']} (copy)"]
        assert await answer(url, "volumes", "list", "-a", "web") == []
        code, out, err = await bodega(url, "volumes", "list", "-a", "web", "--all")
        assert code == 0, err
        assert sorted((r[0], r[1]) for r in rows(out)) == sorted(
            (v, "destroyed") for v in (volume, *copies))

        # A wrong id, and a wrong size, are one line each.
        for args in (["show", "vol_nosuch"], ["extend", "vol_nosuch", "-s", "9"],
                     ["destroy", "vol_nosuch", "--yes"], ["fork", "vol_nosuch"],
                     ["snapshots", "list", "vol_nosuch"], ["snapshots", "create", "vol_nosuch"]):
            code, out, err = await bodega(url, "volumes", *args, "-a", "web")
            assert (code, err.splitlines()) == (1, ["Error: volume not found: vol_nosuch"]), args
        code, out, err = await bodega(url, "volumes", "extend", volume, "-a", "web", "-s", "big")
        assert (code, err.splitlines()) == (1, [
            "Error: --size takes a whole number of GB, or +N to grow by N: got 'big'"])


async def on_terminal(url: str, *args: str, typed: str) -> tuple[int, str]:
    """The command run with a terminal on its standard input, where ``typed`` is typed;
    its exit code, and its output and errors together."""
    main, side = pty.openpty()
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bodega", *args, "--api-url", url, "--token", ADMIN,
            stdin=side, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        os.write(main, typed.encode())
        out, _ = await process.communicate()
    finally:
        os.close(main)
        os.close(side)
    return process.returncode or 0, out.decode()


async def test_destroy_asks_on_a_terminal_and_does_nothing_unless_told_yes(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        url = c.brokers[0].url
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
        volume = (await answer(url, "volumes", "create", "data", "-a", "web"))["id"]
        asked = f"Destroy volume {volume} (data, 1GB in ams)? Its data is deleted for good"

        code, out = await on_terminal(url, "volumes", "destroy", volume, "-a", "web",
                                      typed="n\n")
        assert code == 1, out
        assert asked in out
        assert "Destroyed" not in out
        assert (await answer(url, "volumes", "show", volume, "-a", "web"))["state"] == "created"

        code, out = await on_terminal(url, "volumes", "destroy", volume, "-a", "web",
                                      typed="y\n")
        assert code == 0, out
        assert asked in out
        # The answer typed is echoed on the terminal, not here: the prompt ends no line.
        assert out.endswith(f"[y/N]: Destroyed volume {volume} (data)\n"), out
        assert await answer(url, "volumes", "list", "-a", "web") == []


async def test_a_volume_is_created_with_the_snapshot_policy_flyctl_s_flags_give(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path / "cluster") as c:
        await c.add_worker("ams-1", region="ams")
        await c.add_broker()
        url = c.brokers[0].url
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
        made = await answer(url, "volumes", "create", "data", "-a", "web",
                            "--no-scheduled-snapshots", "--snapshot-retention", "9")
        assert (made["auto_backup_enabled"], made["snapshot_retention"]) == (False, 9)
        code, out, err = await bodega(url, "volumes", "show", made["id"], "-a", "web")
        assert code == 0, err
        shown = fields(out)
        assert (shown["Scheduled snapshots"], shown["Snapshot retention"]) == ("false",
                                                                             "9 days")
        made = await answer(url, "volumes", "create", "logs", "-a", "web")
        assert (made["auto_backup_enabled"], made["snapshot_retention"]) == (True, 5)
        code, _, err = await bodega(url, "volumes", "create", "more", "-a", "web",
                                    "--snapshot-retention", "99")
        assert code == 1
        assert err.startswith("Error: "), err
        assert "between 1 and 60" in err, err
