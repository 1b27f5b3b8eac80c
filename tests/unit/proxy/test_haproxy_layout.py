"""The HAProxy data plane's pure parts: routing view -> layout -> runtime commands or reload."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.proxy.core.routes import Backend
from bodega.proxy.haproxy.core.config import WATCH, HaproxySettings, render, render_hosts
from bodega.proxy.haproxy.core.layout import (
    EMPTY,
    MIN_BACKENDS,
    MIN_SLOTS,
    AppServers,
    Layout,
    ServerSpec,
    plan,
    settled,
    wanted_servers,
)
from bodega.proxy.plane import choose_plane

MAP = "/run/hosts.map"


def spec(mid: str, port: int = 8080, maxconn: int = 0) -> ServerSpec:
    return ServerSpec(mid, "10.0.0.1", port, maxconn)


def step(current: Layout, wanted: dict[str, list[ServerSpec]],
         far: dict[str, list[ServerSpec]] | None = None) -> tuple[Layout, list[str], bool]:
    """``wanted``: each app's near machines; ``far``: its others."""
    servers = {app: AppServers(tuple(specs), tuple((far or {}).get(app, ())))
               for app, specs in wanted.items()}
    p = plan(current, servers, MAP, "localhost")
    return p.layout, list(p.commands), p.reload


def test_the_first_layout_is_a_render_with_room_to_grow() -> None:
    layout, commands, reload = step(EMPTY, {"web": [spec("a"), spec("b")]})
    assert reload
    assert commands == []
    assert len(layout.backends) == MIN_BACKENDS
    assert layout.slots("web")[:2] == (spec("a"), spec("b"))
    assert len(layout.slots("web")) == MIN_SLOTS


def test_a_new_machine_takes_a_free_slot_by_runtime_commands() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a")]})
    index = layout.apps["web"]
    after, commands, reload = step(layout, {"web": [spec("a"), spec("b", 9000, maxconn=5)]})
    assert not reload
    server = f"pool_{index}/s1"
    assert commands == [f"set server {server} addr 10.0.0.1 port 9000",
                        f"set maxconn server {server} 5",
                        f"set server {server} state ready"]  # ready only once it is set up
    assert after.slots("web")[1] == spec("b", 9000, maxconn=5)


def test_a_machine_that_leaves_goes_to_maintenance_and_its_slot_waits_for_its_sessions() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a"), spec("b")]})  # slots: a b _ _
    index = layout.apps["web"]
    slot = (f"pool_{index}", "s1")
    layout, commands, reload = step(layout, {"web": [spec("a")]})
    assert not reload
    assert commands == [f"set server pool_{index}/s1 state maint"]
    # b may still be answering requests it took there: they are still b's.
    assert layout.leaving == {slot: ("web", "b")}
    assert layout.counted()[slot] == ("web", "b")
    # While b has sessions open there, its slot is not refilled: c and d fit in the two
    # free slots, e does not, so this is a reload.
    layout = settled(layout, {slot: 2})
    assert layout.leaving == {slot: ("web", "b")}
    _, _, reload = step(layout, {"web": [spec("a"), spec("c"), spec("d"), spec("e")]})
    assert reload
    # A look that finds them all ended frees it.
    layout = settled(layout, {slot: 0})
    assert layout.leaving == {}
    after, commands, reload = step(layout, {"web": [spec("a"), spec("c"), spec("d"),
                                                    spec("e")]})
    assert not reload
    assert after.slots("web") == (spec("a"), spec("c"), spec("d"), spec("e"))


def test_a_leaving_slot_outside_the_look_stays_and_a_reload_starts_afresh() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a"), spec("b")]})
    layout, _, _ = step(layout, {"web": [spec("a")]})
    assert settled(layout, {}).leaving == layout.leaving  # not seen: still leaving
    # A new shape is a new HAProxy process: its counters never held the old sessions.
    grown, _, reload = step(layout, {"web": [spec("a")], **{f"app{i}": [spec(f"m{i}")]
                                                            for i in range(MIN_BACKENDS)}})
    assert reload
    assert grown.leaving == {}


def test_a_limit_change_is_a_command_on_the_same_slot() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a")]})
    index = layout.apps["web"]
    _, commands, reload = step(layout, {"web": [spec("a", maxconn=3)]})
    assert not reload
    assert commands == [f"set maxconn server pool_{index}/s0 3"]


def test_a_machine_changing_tier_is_ready_near_before_it_leaves_the_far_backend() -> None:
    # ams's only machine "a" serves; "b" elsewhere is far. Then "a" stops: "b" is all
    # there is, so it is near now. Then "a" is back: "b" is far again.
    layout, _, _ = step(EMPTY, {"web": [spec("a")]}, far={"web": [spec("b", 9000)]})
    index = layout.apps["web"]
    assert layout.slots("web")[0] == spec("a")
    assert layout.far_slots("web")[0] == spec("b", 9000)
    alone, commands, reload = step(layout, {"web": [spec("b", 9000)]})
    assert not reload
    assert commands == [f"set server pool_{index}/s0 state maint",
                        f"set server pool_{index}/s1 addr 10.0.0.1 port 9000",
                        f"set maxconn server pool_{index}/s1 0",
                        f"set server pool_{index}/s1 state ready",
                        f"set server far_{index}/s0 state maint"]
    assert alone.leaving == {(f"pool_{index}", "s0"): ("web", "a"),
                             (f"far_{index}", "s0"): ("web", "b")}
    alone = settled(alone, dict.fromkeys(alone.leaving, 0))  # their sessions ended
    back, commands, reload = step(alone, {"web": [spec("a")]}, far={"web": [spec("b", 9000)]})
    assert not reload
    # The slots emptied before are free again; b's near slot, emptied now, waits.
    assert back.slots("web") == (spec("a"), None, None, None)
    assert back.far_slots("web") == (spec("b", 9000), None, None, None)
    assert commands == [f"set server pool_{index}/s0 addr 10.0.0.1 port 8080",
                        f"set maxconn server pool_{index}/s0 0",
                        f"set server pool_{index}/s0 state ready",
                        f"set server pool_{index}/s1 state maint",
                        f"set server far_{index}/s0 addr 10.0.0.1 port 9000",
                        f"set maxconn server far_{index}/s0 0",
                        f"set server far_{index}/s0 state ready"]


def test_an_app_out_of_far_slots_is_a_reload_keeping_its_near_ones() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a")]})
    far = {"web": [spec(f"r{i}") for i in range(MIN_SLOTS + 1)]}
    grown, _, reload = step(layout, {"web": [spec("a")]}, far=far)
    assert reload
    assert grown.slots("web")[0] == spec("a")
    assert set(grown.far_slots("web")) - {None} == set(far["web"])


def test_a_new_app_takes_a_free_backend_then_gets_its_host() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a")]})
    after, commands, reload = step(layout, {"web": [spec("a")], "api": [spec("x")]})
    assert not reload
    index = after.apps["api"]
    assert index != after.apps["web"]
    assert commands[-1] == f"add map {MAP} api.localhost pool_{index}"
    assert f"set server pool_{index}/s0 state ready" in commands


def test_an_app_that_leaves_loses_its_host_and_servers() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a")], "api": [spec("x")]})
    index = layout.apps["api"]
    after, commands, reload = step(layout, {"web": [spec("a")]})
    assert not reload
    assert "api" not in after.apps
    assert commands == [f"del map {MAP} api.localhost",
                        f"set server pool_{index}/s0 state maint"]


def test_running_out_of_backends_or_slots_is_a_reload_keeping_every_slot() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a"), spec("b")]})
    many = {"web": [spec(m) for m in "abcde"]}
    grown, commands, reload = step(layout, many)
    assert reload
    assert commands == []
    assert grown.apps["web"] == layout.apps["web"]
    assert grown.slots("web")[:2] == (spec("a"), spec("b"))  # same slots as before
    assert len(grown.slots("web")) >= 2 * 5
    apps = {f"app{i}": [spec(f"m{i}")] for i in range(MIN_BACKENDS + 1)}
    _, _, reload = step(layout, apps)
    assert reload


def test_only_machines_the_proxy_would_route_to_are_servers() -> None:
    def backend(mid: str, **kw: object) -> Backend:
        fields: dict[str, object] = {"machine_id": mid, "app": "web", "region": "ams",
                                     "worker": "w1", "state": "started", "host": "10.0.0.9",
                                     "port": 80, **kw}
        return Backend(**fields)  # type: ignore[arg-type]

    table = [backend("up"), backend("far", region="sjc", hard_limit=7),
             backend("asleep", state="stopped"), backend("cordoned", cordoned=True),
             backend("orphan", worker="dead")]
    wanted = wanted_servers(["web"], lambda _app: table, lambda w: w == "w1", "ams")
    assert wanted == {"web": AppServers(near=(ServerSpec("up", "10.0.0.9", 80, 0),),
                                        far=(ServerSpec("far", "10.0.0.9", 80, 7),))}
    # None of the proxy's region can serve: every region's machine is near.
    elsewhere = wanted_servers(["web"], lambda _app: table, lambda w: w == "w1", "syd")
    assert elsewhere == {"web": AppServers(near=(ServerSpec("far", "10.0.0.9", 80, 7),
                                                 ServerSpec("up", "10.0.0.9", 80, 0)))}


def test_the_config_routes_hosts_to_backends_with_the_activator_behind() -> None:
    layout, _, _ = step(EMPTY, {"web": [spec("a", maxconn=9)], "idle": []},
                        far={"web": [spec("b", maxconn=2)]})
    settings = HaproxySettings("0.0.0.0", 8080, "127.0.0.1", 4321, Path("/run/admin.sock"),
                               Path(MAP))
    text = render(layout, settings)
    assert "bind 0.0.0.0:8080" in text
    assert "stats socket /run/admin.sock mode 600 level admin expose-fd listeners" in text
    assert "http-request set-var(txn.site) req.hdr(host),field(1,:),lower" in text
    assert f"http-request set-var(txn.backend) var(txn.site),map({MAP})" in text
    assert "use_backend %[var(txn.backend)] if { var(txn.backend) -m found }" in text
    assert "default_backend activator" in text  # unknown hosts: bodega answers 404
    assert text.count("balance leastconn") == 2 * MIN_BACKENDS  # a near and a far each
    # Only the near backends fall back on the activator (a full far one must not).
    assert text.count("server activator 127.0.0.1:4321 backup") == MIN_BACKENDS
    index = layout.apps["web"]
    near, far = text.split(f"backend pool_{index}\n")[1].split(f"backend far_{index}\n")
    assert f"server s0 10.0.0.1:8080 maxconn 9 {WATCH}\n" in near
    assert "server activator" in near
    assert f"server s0 10.0.0.1:8080 maxconn 2 {WATCH}\n" in far.split("\nbackend")[0]
    assert "server activator" not in far.split("\nbackend")[0]
    # The far backend only while every near machine is full and a far one is not, and
    # before the Host's own backend is used.
    spill = (f"    use_backend far_{index} if {{ var(txn.backend) -m str pool_{index} }} "
             f"{{ be_conn_free(pool_{index}) eq 0 }} !{{ be_conn_free(far_{index}) eq 0 }}\n")
    assert spill in text
    assert text.index(spill) < text.index("use_backend %[var(txn.backend)]")
    assert text.count("be_conn_free(pool_") == MIN_BACKENDS
    # A connect nobody answers gives up in a fraction of a second, and is retried.
    assert "    timeout connect 500ms\n" in text
    assert "    timeout check 500ms\n" in text
    # Every slot, empty ones too (the runtime API readies them later), is marked down by a
    # refused connect, so its request's retry can reach the activator.
    slots = [line for line in text.splitlines() if line.startswith("    server s")]
    assert len(slots) > 1
    assert all(line.endswith(WATCH) for line in slots)
    assert "on-error mark-down" in WATCH
    # A slot marked down by failed connects is checked again a second later, not at the
    # next of its minute's checks (HAProxy moves that check only with a fastinter).
    assert "fastinter 1s downinter 1s" in WATCH
    assert "retry-on conn-failure empty-response\n" in text
    # Only a client's first request is kept for that retry; the flag is read before it is set.
    skip = "    http-request disable-l7-retry if { var(sess.kept) -m found }\n"
    mark = "    http-request set-var(sess.kept) bool(true)\n"
    assert skip in text
    assert mark in text
    assert text.index(skip) < text.index(mark)
    assert "option redispatch 1" in text
    hosts = render_hosts(layout, "localhost")
    assert hosts == (f"idle.localhost pool_{layout.apps['idle']}\n"
                     f"web.localhost pool_{layout.apps['web']}\n")


def test_the_data_plane_is_haproxy_when_installed_and_python_otherwise() -> None:
    assert choose_plane("auto", "/usr/sbin/haproxy").binary == "/usr/sbin/haproxy"
    assert choose_plane("auto", "").binary is None
    assert choose_plane("python", "/usr/sbin/haproxy").binary is None
    with pytest.raises(ValueError, match="haproxy is not installed"):
        choose_plane("haproxy", "")
    with pytest.raises(ValueError, match="--data-plane must be one of"):
        choose_plane("nginx")
