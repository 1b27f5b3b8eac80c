"""Reading HAProxy's counters: ``show stat`` rows, machine load for autostop, metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from bodega.proxy.core.load import Load
from bodega.proxy.haproxy.observed import CombinedLoad, HaproxyCollector, StatsLoad
from bodega.proxy.haproxy.runtime import StatRow, parse_stat

SHOW_STAT = """# pxname,svname,qcur,qmax,scur,smax,slim,stot,econ,wretr,wredis,status,lbtot,\
hrsp_2xx,hrsp_5xx,req_tot
public,FRONTEND,,,3,9,,120,,,,OPEN,,118,2,120
pool_0,s0,1,1,2,5,,70,0,0,0,UP,70,69,1,
pool_0,s1,0,0,0,4,,50,1,1,1,MAINT,50,50,0,
pool_0,BACKEND,1,1,2,9,,120,1,1,1,UP,120,119,1,

"""


def row(total: int, current: int = 0, queued: int = 0) -> StatRow:
    return StatRow("pool_0", "s0", current, queued, total, total, (), 0, 0, 0, "UP")


def test_show_stat_rows_are_parsed_by_column_name() -> None:
    rows = parse_stat(SHOW_STAT)
    assert [(r.proxy, r.server) for r in rows] == [
        ("public", "FRONTEND"), ("pool_0", "s0"), ("pool_0", "s1"), ("pool_0", "BACKEND")]
    s0 = rows[1]
    assert (s0.current, s0.queued, s0.total, s0.requests, s0.status) == (2, 1, 70, 70, "UP")
    assert dict(s0.responses)["2xx"] == 69
    assert rows[0].requests == 120  # req_tot for a frontend
    assert parse_stat("") == []
    assert parse_stat("Unknown command\n") == []


def test_stats_load_counts_sessions_as_outstanding_and_idles_after_the_last() -> None:
    now = [100.0]
    load = StatsLoad(lambda: now[0])
    load.observe({"m": row(5)})
    assert load.outstanding == {}
    assert load.idle_since == {"m": 100.0}
    now[0] = 110.0
    load.observe({"m": row(5)})  # nothing moved: idle since the first look
    assert load.idle_since == {"m": 100.0}
    load.observe({"m": row(9, current=2, queued=1)})
    assert load.outstanding == {"m": 3}
    assert "m" not in load.idle_since
    now[0] = 120.0
    load.observe({"m": row(9)})
    assert load.outstanding == {}
    assert load.idle_since == {"m": 120.0}
    now[0] = 130.0
    load.observe({"m": row(12)})  # requests came and went between two looks: busy then
    assert load.idle_since == {"m": 130.0}


def test_combined_load_is_busy_if_either_is_and_idle_since_the_latest() -> None:
    ours, theirs = Load(lambda: 50.0), StatsLoad(lambda: 60.0)
    ours.seen("m")
    theirs.observe({"m": row(1)})
    both = CombinedLoad(ours, theirs)
    assert both.idle_since == {"m": 60.0}
    ours.begin("m")
    theirs.observe({"m": row(2, current=1)})
    assert both.outstanding == {"m": 2}
    assert both.idle_since == {}


def test_haproxy_counters_are_metrics_by_app_and_machine() -> None:
    registry = CollectorRegistry()
    collector = HaproxyCollector()
    registry.register(collector)
    collector.update(parse_stat(SHOW_STAT), {("pool_0", "s0"): ("web", "m1")},
                     {"pool_0": "web"}, 2)
    text = generate_latest(registry).decode()
    assert 'bodega_haproxy_server_requests_total{app="web",machine="m1"} 70.0' in text
    assert 'bodega_haproxy_server_current{app="web",machine="m1"} 2.0' in text
    assert 'bodega_haproxy_app_responses_total{app="web",code="5xx"} 1.0' in text
    assert 'bodega_haproxy_frontend_requests_total{frontend="public"} 120.0' in text
    assert "bodega_haproxy_reloads_total 2.0" in text
    assert "s1" not in text  # an empty slot is no machine


def test_counters_carry_over_a_reload_and_never_go_back() -> None:
    # A reload starts a new HAProxy process whose counters are zero: what the old one
    # counted stays in the metric, which only goes forward.
    registry = CollectorRegistry()
    collector = HaproxyCollector()
    registry.register(collector)
    slots = {("pool_0", "s0"): ("web", "m1")}
    collector.update(parse_stat(SHOW_STAT), slots, {"pool_0": "web"}, 2)
    collector.update(parse_stat(SHOW_STAT.replace(",70,69,1,", ",5,5,0,")), slots,
                     {"pool_0": "web"}, 3)
    text = generate_latest(registry).decode()
    assert 'bodega_haproxy_server_requests_total{app="web",machine="m1"} 75.0' in text
    assert 'bodega_haproxy_frontend_requests_total{frontend="public"} 240.0' in text
    # A drop seen without a reload counted (the stats came from the new process first).
    collector.update(parse_stat(SHOW_STAT.replace(",70,69,1,", ",1,1,0,")), slots,
                     {"pool_0": "web"}, 3)
    text = generate_latest(registry).decode()
    assert 'bodega_haproxy_server_requests_total{app="web",machine="m1"} 76.0' in text
    assert 'bodega_haproxy_frontend_requests_total{frontend="public"} 240.0' in text
