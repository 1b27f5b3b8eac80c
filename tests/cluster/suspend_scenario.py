"""The proxy's ``autostop = "suspend"`` in a real cluster: idle machines freeze, requests thaw.

Two workers (process driver, cgroup freezer), a broker and a proxy, each its
own process. An idle machine whose service says ``autostop = "suspend"`` is
suspended, not stopped: its process stays, frozen; the next request wakes it
with a start, which resumes that same process, and is answered by it. The test is in
``test_proxy_cluster.py``, on that module's shared cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from tests.freezer_kit import frozen

from .fleet_kit import TOKEN, Fleet, echo_config, machine_pids, machines_of, proxy_metric, until


async def idle_machines_are_suspended_and_a_request_resumes_the_same_process(
    f: Fleet,
) -> None:
    marker = f"bodega-proxy-{uuid.uuid4().hex[:8]}"
    async with f.api() as api, f.web("nap") as web:
        await api.post("/v1/apps", json={"app_name": "nap", "org_slug": "personal"})
        machine = (await api.post("/v1/apps/nap/machines", json={
            "config": echo_config(marker, autostop="suspend", autostart=True)})).json()
        mid = machine["id"]
        await api.get(f"/v1/apps/nap/machines/{mid}/wait")

        async def served() -> bool:
            answer = await web.get("/")
            return answer.status_code == 200 and answer.text.split()[0] == mid

        await until(served)
        pids = sorted(machine_pids(mid))
        assert pids

        async def suspended() -> bool:
            return [m["state"] for m in await machines_of(api, "nap")] == ["suspended"]

        await until(suspended)
        assert all(frozen(pid) for pid in pids)
        assert await proxy_metric(f, 'bodega_proxy_autostops_total{app="nap"}') == 1
        events = (await api.get(f"/v1/apps/nap/machines/{mid}/events")).json()
        assert (events[0]["type"], events[0]["status"]) == ("suspend", "suspended")

        # Counted from here: a request that came while the view still showed the new
        # machine as starting may have asked for a start of its own.
        starts = await proxy_metric(f, 'bodega_proxy_autostarts_total{app="nap",'
                                       'outcome="started"}')
        answer = await web.get("/")  # nothing runs: the proxy resumes it for this request
        assert answer.status_code == 200
        assert answer.text.split()[0] == mid
        assert sorted(machine_pids(mid)) == pids  # the same processes, thawed
        assert not any(frozen(pid) for pid in pids)
        assert await proxy_metric(f, 'bodega_proxy_autostarts_total{app="nap",'
                                     'outcome="started"}') == starts + 1
        state = (await api.get(f"/v1/apps/nap/machines/{mid}")).json()["state"]
        assert state == "started"

        # The CLI suspends too; a suspend of a stopped machine fails in one line.
        env = {**os.environ, "BODEGA_API_URL": f.daemons["broker"].url,
               "BODEGA_API_TOKEN": TOKEN}

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "bodega", "machine", *args,
                                   mid, "--app", "nap"], capture_output=True, text=True,
                                  env=env, timeout=60, check=False)

        done = cli("suspend")
        assert done.returncode == 0, done.stderr
        assert "suspend requested" in done.stdout
        await until(suspended)
        await api.post(f"/v1/apps/nap/machines/{mid}/stop")
        await api.get(f"/v1/apps/nap/machines/{mid}/wait", params={"state": "stopped"})
        refused = cli("suspend")
        assert refused.returncode == 1
        assert refused.stderr.strip().splitlines() == [
            f"Error: failed_precondition: cannot suspend machine {mid} in state stopped"]
