"""The configuration bodega renders passes HAProxy's own check (``haproxy -c``) without a
warning: a warning is HAProxy saying the config does not mean what it reads as (a rule
that runs in another order than written, say), which the proxy's log would otherwise
repeat at every reload. The config checked is the one a data plane wrote for a routing
table with something in every part: TLS, an app with machines in the proxy's region and
in another (its near and far backends), a TCP service passed raw and one ended TLS, and
static prefixes the activator answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.statics import StaticsTable
from bodega.proxy.core.tcp_routes import TcpTable

from .edge_kit import edge, free_tcp_port
from .plane_kit import haproxy_binary
from .test_forwarding import machine_doc, routed
from .test_tcp_services import listeners_of, tcp_doc


async def test_haproxy_checks_the_rendered_config_without_a_warning(tmp_path: Path) -> None:
    # Listening, as a machine takes a slot once its port accepts (admission.py).
    near, far = free_tcp_port(), free_tcp_port()
    listening = [await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", port)
                 for port in (near, far)]
    table = RoutingTable()
    table.put_machine("near-1", routed(machine_doc("near-1", near, region="ams")))
    table.put_machine("far-1", routed(machine_doc("far-1", far, region="syd")))
    tcp = TcpTable()
    tcp.put("raw-1", listeners_of(tcp_doc("raw-1", 9103, free_tcp_port())))
    tcp.put("tls-1", listeners_of(tcp_doc("tls-1", 9104, free_tcp_port(), handlers=["tls"])))
    statics = StaticsTable()
    doc = machine_doc("near-1", near, region="ams")
    doc["config"] |= {"image": "registry.example/web:1", "statics": [
        {"guest_path": "/app/public", "url_prefix": "/static/"},
        {"guest_path": "/srv", "url_prefix": "/"}]}
    statics.put_machine("near-1", routed(doc))
    try:
        async with edge(table, tmp_path, tcp=tcp, statics=statics) as e:
            await e.synced()
            config = e.dataplane.process.config_path
            text = config.read_text()
            assert f"server s0 127.0.0.1:{near}" in text, text  # the near backend
            assert f"server s0 127.0.0.1:{far}" in text, text  # the far one
            assert text.count("mode tcp") >= 2, text
            statics_map = config.with_name("statics.map")
            assert f"map_beg({statics_map})" in text, text
            assert statics_map.read_text() == "web.localhost web\nweb.localhost/static web\n"
            check = await asyncio.create_subprocess_exec(
                haproxy_binary(), "-c", "-f", str(config), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT)
            out = (await check.communicate())[0].decode(errors="replace")
    finally:
        for server in listening:
            server.close()
    assert check.returncode == 0, out
    assert "[WARNING]" not in out, out
    assert "[ALERT]" not in out, out
