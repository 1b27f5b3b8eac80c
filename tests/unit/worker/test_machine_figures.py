"""The worker's fly_instance_* series, read from a cgroup tree and /proc laid out as a host's."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.host.usage import BLKIO_BYTES, UsageReader
from bodega.worker.ops.figures import MachineFigures, StartedRow

STAT = "7 (prog) S 1 7 7 0 -1 0 0 0 0 0 {} 0 0 0 20 0 1 0 1 1 1"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def proc(root: Path, pid: int, ticks: int, received: int = 0) -> None:
    write(root / str(pid) / "stat", STAT.format(ticks))
    write(root / str(pid) / "io", "read_bytes: 10\nwrite_bytes: 20\n")
    write(root / str(pid) / "ns" / "net", f"namespace of {pid}")
    write(root / str(pid) / "net" / "dev",
          f"h\nh\n  eth0: {received} 1 0 0 0 0 0 0 700 1 0 0 0 0 0 0\n")


def named_netns(netns: Path, name: str, proc: Path, pid: int) -> None:
    """``ip netns``'s name for the namespace ``pid`` is in: the same inode."""
    netns.mkdir(parents=True, exist_ok=True)
    (netns / name).hardlink_to(proc / str(pid) / "ns" / "net")


def test_v1_process_machine_sums_its_processes_and_an_image_machine_reads_its_cgroups(
        tmp_path: Path) -> None:
    cg, pr = tmp_path / "cgroup", tmp_path / "proc"
    memory = cg / "memory" / "bodega" / "w" / "m1"
    write(memory / "cgroup.procs", "7\n8\n")
    write(memory / "memory.usage_in_bytes", "1000\n")
    write(memory / "memory.max_usage_in_bytes", "2000\n")
    write(memory / "memory.limit_in_bytes", "268435456\n")
    proc(pr, 7, 100, received=1)  # one of runsc's own, in an empty namespace
    proc(pr, 8, 50, received=500)
    named_netns(tmp_path / "netns", "ns1", pr, 8)
    image = cg / "memory" / "bodega" / "w" / "m2"
    write(image / "cgroup.procs", "9\n")
    write(image / "memory.usage_in_bytes", "5\n")
    write(image / "memory.limit_in_bytes", "9223372036854771712\n")
    write(cg / "cpuacct" / "bodega" / "w" / "m2" / "cpuacct.usage", "3000000000\n")
    write(cg / "blkio" / "bodega" / "w" / "m2" / BLKIO_BYTES, "8:0 Read 1\n8:0 Write 2\n")
    proc(pr, 9, 999)
    reader = UsageReader(Cgroups(1, "w", cg), pr, tmp_path / "netns")
    reader.ticks = 100

    one = reader.read("m1", "ns1")
    assert one is not None
    assert (one.cpu_seconds, one.memory_bytes, one.memory_peak_bytes) == (1.5, 1000, 2000)
    assert one.memory_limit_bytes == 268435456
    assert (one.io_read_bytes, one.io_write_bytes) == (20, 40)
    assert (one.net_recv_bytes, one.net_sent_bytes) == (500, 700)
    two = reader.read("m2", None)
    assert two is not None
    assert (two.cpu_seconds, two.io_read_bytes, two.io_write_bytes) == (3.0, 1, 2)
    assert two.memory_limit_bytes is None
    assert two.net_recv_bytes is None
    assert reader.read("gone", "ns1") is None
    gone = reader.read("m1", "ns-gone")  # its namespace removed under it: no net bytes
    assert gone is not None
    assert gone.net_recv_bytes is None


def test_v2_reads_the_machines_own_files(tmp_path: Path) -> None:
    home = tmp_path / "bodega" / "w" / "m1"
    write(home / "cgroup.procs", "")
    write(home / "cpu.stat", "usage_usec 250000\n")
    write(home / "memory.current", "10\n")
    write(home / "memory.peak", "20\n")
    write(home / "memory.max", "max\n")
    write(home / "io.stat", "8:0 rbytes=3 wbytes=4 rios=1 wios=1\n")
    usage = UsageReader(Cgroups(2, "w", tmp_path), tmp_path / "proc").read("m1", "ns1")
    assert usage is not None
    assert (usage.cpu_seconds, usage.memory_bytes, usage.memory_peak_bytes) == (0.25, 10, 20)
    assert (usage.memory_limit_bytes, usage.io_read_bytes, usage.io_write_bytes) == (None, 3, 4)
    assert usage.net_recv_bytes is None  # no process to read its namespace's counters through


def test_the_series_carry_each_machines_labels_and_leave_out_what_has_no_source(
        tmp_path: Path) -> None:
    cg = tmp_path / "cgroup"
    home = cg / "memory" / "bodega" / "w" / "m1"
    write(home / "cgroup.procs", "7\n")
    write(home / "memory.usage_in_bytes", "1000\n")
    proc(tmp_path / "proc", 7, 100)
    registry = CollectorRegistry()
    registry.register(MachineFigures(
        lambda: [("m1", "web", "ams", None), ("m2", "web", "ams", None)],
        UsageReader(Cgroups(1, "w", cg), tmp_path / "proc"), "host-a",
        lambda app: "acme"))
    text = generate_latest(registry).decode()
    labels = 'app="web",host="host-a",machine="m1",org="acme",region="ams"'
    assert f"fly_instance_memory_bytes{{{labels}}} 1000.0" in text
    assert f"fly_instance_cpu_seconds_total{{{labels}}}" in text
    assert "m2" not in text  # no cgroup: no run to measure
    assert "fly_instance_net_recv_bytes_total{" not in text  # no namespace of its own
    assert "fly_instance_memory_limit_bytes{" not in text


def test_a_counter_goes_on_from_where_it_was_when_a_process_of_the_machine_ends(
        tmp_path: Path) -> None:
    """A v1 process machine's cpu is its processes' sum: one ending takes its time out of
    the sum, and the series keeps it rather than step back (a reset to Prometheus)."""
    cg, pr = tmp_path / "cgroup", tmp_path / "proc"
    home = cg / "memory" / "bodega" / "w" / "m1"
    write(home / "cgroup.procs", "7\n8\n")
    proc(pr, 7, 100)
    proc(pr, 8, 300)
    reader = UsageReader(Cgroups(1, "w", cg), pr)
    reader.ticks = 100
    started: list[StartedRow] = [("m1", "web", "ams", None)]
    figures = MachineFigures(lambda: started, reader, "h", lambda app: "personal")
    registry = CollectorRegistry()
    registry.register(figures)

    def cpu() -> float:
        text = generate_latest(registry).decode()
        (line,) = [x for x in text.splitlines() if x.startswith("fly_instance_cpu_seconds")]
        return float(line.rsplit(" ", 1)[1])

    assert cpu() == 4.0
    write(home / "cgroup.procs", "7\n")  # 8 ended, unwaited: its 3 s leave the sum
    proc(pr, 7, 150)
    # Where it was (Prometheus would take 1.5 for a reset, and count it all again); what
    # 7 used in the step 8 ended is hidden, as far as 8's share goes.
    assert cpu() == 4.0
    proc(pr, 7, 200)
    assert cpu() == 4.5
    started.clear()  # seen stopped: forgotten
    assert "fly_instance_cpu_seconds_total{" not in generate_latest(registry).decode()
    started.append(("m1", "web", "ams", None))
    assert cpu() == 2.0  # started again: its kernel's count
