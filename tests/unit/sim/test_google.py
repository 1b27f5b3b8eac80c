"""The Google 2011 task_events loader on a small hand-made sample of that format."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.sim.engine import SimConfig, simulate
from bodega.sim.fleet import build_hosts
from bodega.sim.google import GoogleMapping, TraceFormatError, parse_task_events, read_task_events
from bodega.sim.google_machines import parse_machine_events, read_machine_events
from bodega.sim.policies import named
from bodega.sim.trace import Trace

SAMPLE = Path(__file__).parent / "data" / "task_events_sample.csv"


def test_the_sample_becomes_one_arrival_per_scheduled_run() -> None:
    trace = read_task_events(SAMPLE)
    runs = [(a.app, a.time, a.lifetime, a.cpus, a.memory_mb) for a in trace.arrivals]
    # Job ...52 task 0: scheduled at 0 s, finished at 900 s. 0.0125 of 64 cpus -> 1 cpu;
    # 0.0159 of 256 GB -> 4169 MB (rounded up).
    # Job ...52 task 1: scheduled at 0 s, failed at 3000 s.
    # Job ...53 task 0: scheduled at 600 s, evicted at 1200 s; rescheduled at 1260 s and
    # killed at 1800 s: two arrivals. 0.0625 of 64 -> 4 cpus; 0.0318 of 256 GB -> 8337 MB.
    # Job ...55 task 0: scheduled at 2400 s, never ends: runs to the last event (3600 s).
    # Job ...54 is only submitted, ...56 only updated, ...57 lies after the trace window.
    assert runs == [
        ("job-6251812952", 0.0, 900.0, 1, 4169),
        ("job-6251812952", 0.0, 3000.0, 1, 4169),
        ("job-6251812953", 600.0, 600.0, 4, 8337),
        ("job-6251812953", 1260.0, 540.0, 4, 8337),
        ("job-6251812955", 2400.0, 1200.0, 1, 263),
    ]


def test_the_mapping_sets_sizes_and_regions() -> None:
    mapping = GoogleMapping(cpus_per_unit=16, memory_mb_per_unit=65536, cpu_kind="performance",
                            regions=("ams", "iad"))
    trace = read_task_events(SAMPLE, mapping)
    first = trace.arrivals[0]
    assert (first.cpu_kind, first.cpus, first.memory_mb) == ("performance", 1, 1043)
    assert {a.region for a in trace.arrivals} == {"ams", "iad"}  # by job ID, even and odd


def test_gzipped_part_files_load_the_same(tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "part-00000-of-00500.csv.gz"
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    assert read_task_events(packed).arrivals == read_task_events(SAMPLE).arrivals


def test_a_malformed_row_names_its_line() -> None:
    lines = SAMPLE.read_text().splitlines()
    with pytest.raises(TraceFormatError, match="line 3: 12 columns"):
        parse_task_events([*lines[:2], "0,,1,0,,1,u,2,0,0.1,0.1,0.1", *lines[2:]])
    with pytest.raises(TraceFormatError, match=r"line 1: .*integers"):
        parse_task_events(["soon,,1,0,,1,u,2,0,0.1,0.1,0.1,0"])


MACHINES = Path(__file__).parent / "data" / "machine_events_sample.csv"


def test_machine_events_give_the_fleet_and_its_outages() -> None:
    cell = read_machine_events(MACHINES)
    # At time 0: 0.25, 0.5, 0.5 and 1.0 of the largest machine (64 cpus, 256 GB); one ADD
    # has no capacity and machine 6 comes later: both left out. Sorted by shape, then ID.
    [region] = cell.fleet.regions
    assert [(h.cpus, h.memory_mb, h.count) for h in region.hosts] == [
        (16, 65353, 1), (32, 65353, 1), (32, 130941, 1), (64, 262144, 1)]
    assert cell.hosts == {"257348783": "ams-001", "351618647": "ams-002",
                          "1436333635": "ams-003", "4820204869": "ams-004"}
    assert {h.name for h in build_hosts(cell.fleet)} == set(cell.hosts.values())
    # 1436333635 is removed at 1,200 s and added back at 2,400 s; 257348783 is removed at
    # 3,000 s for good (down to the last event, 3,600 s). UPDATEs and machine 6 change nothing.
    assert [(o.host, o.time, o.duration) for o in cell.outages] == [
        ("ams-003", 1200.0, 1200.0), ("ams-001", 3000.0, 600.0)]


def test_a_task_trace_replays_on_its_cell_with_its_deaths() -> None:
    cell = read_machine_events(MACHINES)
    tasks = read_task_events(SAMPLE)
    trace = Trace.of(tasks.name, tasks.arrivals, cell.outages)
    result = simulate(trace, cell.fleet, named("spread"),
                      SimConfig(brokers=1, gossip_delay=0, sample_every=60))
    # Spread puts job ...52's two tasks on the two emptiest hosts, ams-004 and ams-003.
    # ams-003 dies at 1,200 s with task 1 on it: seen dead at 1,205 s, the task is created
    # again at 1,265 s (on ams-004). ams-001 holds nothing when it goes at 3,000 s.
    assert (result.host_deaths, result.machines_lost, result.recreated) == (2, 1, 1)
    assert result.placed == len(tasks.arrivals) + 1


def test_a_malformed_machine_event_names_its_line() -> None:
    with pytest.raises(TraceFormatError, match="machine_events line 2: 4 columns"):
        parse_machine_events(["0,1,0,p,0.5,0.5", "0,2,0,p"])
    with pytest.raises(TraceFormatError, match="line 1: timestamp, machine ID"):
        parse_machine_events(["x,1,0,p,0.5,0.5"])
