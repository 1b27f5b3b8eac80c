"""A `bodega up` for the edge benches, as a user runs it, and what they make on it.

One region, one worker, the process driver, every port free; the proxy's data plane is
HAProxy when it is installed, as `bodega up` chooses. Apps, machines and certificates are
made through the public API with the cluster's token. A peer (nginx) needs the machine's
own address: it is read from the registry through the query API (``/v1/queries``), as an
operator's automation would read it; and for TLS the certificate the edge serves by default
(``*.localhost``, from the cluster CA), to serve the very same.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port
from tests.leftovers_kit import sweep_data_dir

from bodega.cluster.edge_files import DEFAULT_CERT
from bodega.wire.public.queries import Row, Statement, read_event

PORT_TRIES = 3  # starts of `bodega up` when a port it was given was taken meanwhile
OCTETS = (200, 232)  # the machine ranges the start benches take too (tests/cidr_kit.py)


@dataclass(frozen=True)
class Machine:
    id: str
    address: str  # where the machine's services listen, reachable from the host


class UpCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.cidr = machine_cidr(*OCTETS)
        self.session: aiohttp.ClientSession | None = None
        self.up = self._up(0)

    def _up(self, attempt: int) -> UpProcess:
        """`bodega up` on ports free now (another process may take one before it binds:
        then it is started again, on others)."""
        self.proxy_port, self.tls_port = free_port(), free_port()
        return UpProcess(self.root / f"cluster-{attempt}", "--regions", "ams",
                         "--workers-per-region", "1", "--driver", "process",
                         "--api-port", str(free_port()), "--proxy-port", str(self.proxy_port),
                         "--proxy-tls-port", str(self.tls_port), "--machine-cidr", self.cidr,
                         "--log-level", "info")

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_port}"

    @property
    def tls_url(self) -> str:
        return f"https://127.0.0.1:{self.tls_port}"

    @property
    def default_certificate(self) -> Path:
        """The key and chain the TLS edge serves when no app's certificate matches."""
        return self.up.data_dir / DEFAULT_CERT

    @property
    def plane(self) -> str:
        """The proxy's own line naming its data plane."""
        log = self.up.data_dir / "logs" / "proxy.log"
        return next((line for line in log.read_text().splitlines() if "data plane" in line),
                    "")

    async def __aenter__(self) -> UpCluster:
        os.environ["BODEGA_CONFIG"] = str(self.root / "contexts.toml")  # not the user's
        for attempt in range(1, PORT_TRIES + 1):
            await self.up.start()
            try:
                await self.up.until_line("bodega is up")
                break
            except AssertionError:
                await self.up.end()
                await sweep_data_dir(self.up.data_dir)
                if "address already in use" not in self.up.output or attempt == PORT_TRIES:
                    raise
                self.up = self._up(attempt)
            except BaseException:
                await self.up.end()
                raise
        self.session = aiohttp.ClientSession(
            base_url=self.up.state()["api_url"],
            headers={"Authorization": f"Bearer {self.up.token()}"})
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self.session is not None:
            await self.session.close()
        await self.up.end()
        await sweep_data_dir(self.up.data_dir)  # what a stop cut short left

    async def call(self, method: str, path: str, **kw: Any) -> Any:
        assert self.session is not None
        async with self.session.request(method, path, **kw) as answer:
            doc = await answer.json(content_type=None)
            if answer.status >= 400:
                raise SystemExit(f"{method} {path}: {answer.status} {doc}")
            return doc

    async def app(self, name: str) -> None:
        await self.call("POST", "/v1/apps", json={"app_name": name, "org_slug": "personal"})

    async def machine(self, app: str, config: dict[str, Any]) -> Machine:
        """A machine of ``app``, created and started."""
        made = await self.call("POST", f"/v1/apps/{app}/machines", json={"config": config})
        await self.call("GET", f"/v1/apps/{app}/machines/{made['id']}/wait",
                        params={"state": "started", "timeout": "60"})
        return Machine(made["id"], await self.address(made["id"]))

    async def address(self, machine_id: str) -> str:
        """The machine's service address, as the registry has it (once its row has come)."""
        assert self.session is not None
        statement = Statement(sql="SELECT json_extract(doc, '$.service_host') FROM machines "
                                  "WHERE id = ?", params=[machine_id])
        for _ in range(100):
            async with self.session.post("/v1/queries", json=statement.to_json()) as answer:
                if answer.status != 200:
                    raise SystemExit(f"query: {answer.status} {await answer.text()}")
                text = await answer.text()
            found = [e.values[0] for e in map(read_event, text.splitlines()) if isinstance(e, Row)]
            if found and isinstance(found[0], str):
                return found[0]
            if found:
                raise SystemExit(f"the registry has no address for machine {machine_id}")
            await asyncio.sleep(0.1)
        raise SystemExit(f"machine {machine_id} never reached the registry")
