"""The parsing of a machine's cgroup and /proc files into its figures."""

from __future__ import annotations

from bodega.worker.core.usage_files import (
    cpu_seconds_v1,
    cpu_seconds_v2,
    io_v1,
    io_v2,
    keyed,
    memory_limit,
    net_dev,
    number,
    proc_cpu_seconds,
    proc_io,
)

CPU_STAT_V2 = """usage_usec 2500000
user_usec 2000000
system_usec 500000
nr_periods 0
"""

BLKIO = """8:0 Read 4096
8:0 Write 8192
8:0 Sync 12288
8:0 Async 0
8:0 Discard 0
8:0 Total 12288
8:16 Read 100
8:16 Write 1
8:16 Total 101
Total 12389
"""

IO_STAT = """8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0
8:16 rbytes=100 wbytes=1 rios=1 wios=1 dbytes=0 dios=0
"""

# A command with spaces and parentheses: the fields are counted after the last ")".
STAT = ("4242 (my (odd) prog) R 1 4242 4242 0 -1 4194560 100 0 0 0 "
        "250 50 7 3 20 0 1 0 100 1000 10 18446744073709551615")

IO = """rchar: 100
wchar: 200
syscr: 1
syscw: 2
read_bytes: 4096
write_bytes: 8192
cancelled_write_bytes: 0
"""

NET_DEV = "\n".join((
    "Inter-|   Receive                            |  Transmit",
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets ...",
    "    lo:     10       1    0    0    0     0          0         0       10       1 0 0 0",
    "  eth0: 123456     100    0    0    0     0          0         0    65432      90 0 0 0",
))


def test_cpu_time_from_either_hierarchy() -> None:
    assert cpu_seconds_v2(CPU_STAT_V2) == 2.5
    assert cpu_seconds_v1("1500000000\n") == 1.5
    assert cpu_seconds_v2(None) is None
    assert cpu_seconds_v1(None) is None
    assert cpu_seconds_v2("user_usec 3\n") is None


def test_numbers_and_keys() -> None:
    assert number("42\n") == 42
    assert number("max") is None
    assert number(None) is None
    assert keyed(CPU_STAT_V2, "system_usec") == 500000
    assert keyed(CPU_STAT_V2, "absent") is None


def test_a_memory_limit_that_is_none_reads_as_none() -> None:
    assert memory_limit("268435456\n") == 268435456
    assert memory_limit("max\n") is None
    assert memory_limit("9223372036854771712\n") is None  # v1's "unlimited"
    assert memory_limit(None) is None


def test_io_sums_reads_and_writes_over_devices_not_totals() -> None:
    assert io_v1(BLKIO) == (4196, 8193)
    assert io_v2(IO_STAT) == (4196, 8193)
    assert io_v1("") == (0, 0)
    assert io_v1(None) is None
    assert io_v2(None) is None


def test_process_times_count_children_waited_for() -> None:
    # utime 250 + stime 50 + cutime 7 + cstime 3 = 310 ticks
    assert proc_cpu_seconds([STAT, STAT], 100) == 6.2
    assert proc_cpu_seconds([], 100) is None
    assert proc_cpu_seconds(["garbage"], 100) is None


def test_process_io_is_storage_bytes_not_chars() -> None:
    assert proc_io([IO, IO]) == (8192, 16384)
    assert proc_io([]) is None


def test_net_bytes_are_eth0s() -> None:
    assert net_dev(NET_DEV) == (123456, 65432)
    assert net_dev(NET_DEV, "lo") == (10, 10)
    assert net_dev(NET_DEV, "eth1") is None
    assert net_dev(None) is None
