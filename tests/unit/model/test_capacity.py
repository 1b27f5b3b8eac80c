from hypothesis import given
from hypothesis import strategies as st

from bodega.model.capacity import Ask, Totals, Usage, describe_free, fits, shortfalls


def totals(**kw: object) -> Totals:
    base: dict[str, object] = {"cpus": 4, "memory_mb": 4096, "disk_gb": 100}
    base.update(kw)
    return Totals(**base)  # type: ignore[arg-type]


def test_performance_cpus_are_dedicated_shared_are_oversubscribed() -> None:
    t = totals(shared_cpu_ratio=4.0)
    assert t.millicpus_for(Ask(cpu_kind="performance", cpus=2)) == 2000
    assert t.millicpus_for(Ask(cpu_kind="shared", cpus=2)) == 500


def test_ratio_rounds_shared_cost_up_so_it_never_oversubscribes_past_the_ratio() -> None:
    t = totals(cpus=1, shared_cpu_ratio=3.0)
    one = t.millicpus_for(Ask(cpu_kind="shared", cpus=1))
    assert one == 334
    assert 3 * one > 1000 - one  # a fourth would not fit
    used = Usage(millicpus=3 * one)
    assert not fits(t, used, Ask(cpu_kind="shared", cpus=1, memory_mb=0))


def test_shortfalls_name_every_missing_resource() -> None:
    t = totals(cpus=1, memory_mb=512, disk_gb=1)
    reasons = shortfalls(t, Usage(millicpus=1000, memory_mb=512, disk_gb=1),
                         Ask(cpu_kind="performance", cpus=1, memory_mb=256, disk_gb=1))
    assert [r.split(":")[0] for r in reasons] == ["cpu", "memory", "disk"]
    assert "needs 256 MB, 0 MB free" in reasons[1]


def test_kind_not_offered() -> None:
    t = totals(cpu_kinds=("shared",))
    assert shortfalls(t, Usage(), Ask(cpu_kind="performance", cpus=1)) == [
        "cpu kind performance not offered"
    ]


def test_gpus_by_kind_and_any_kind() -> None:
    t = totals(gpus={"a100": 1, "l40s": 2})
    assert fits(t, Usage(), Ask(gpus=2, gpu_kind="l40s"))
    assert not fits(t, Usage(), Ask(gpus=2, gpu_kind="a100"))
    used = Usage().plus(t, Ask(gpus=2))
    assert used.gpus == {"l40s": 2}
    assert fits(t, used, Ask(gpus=1))
    assert not fits(t, used, Ask(gpus=2))


def test_disk_only_ask_ignores_compute() -> None:
    t = totals(memory_mb=0)
    assert fits(t, Usage(), Ask(memory_mb=256, disk_gb=10), compute=False)
    assert not fits(t, Usage(), Ask(memory_mb=256, disk_gb=10))


def test_describe_free() -> None:
    assert describe_free(totals(), Usage(millicpus=1500, memory_mb=1024, disk_gb=10)) == (
        "2.5 cpus, 3072 MB memory, 90 GB disk free"
    )


@given(
    st.lists(
        st.tuples(st.sampled_from(["shared", "performance"]), st.integers(1, 8),
                  st.integers(0, 8).map(lambda n: n * 256)),
        max_size=40,
    ),
    st.floats(1.0, 16.0),
)
def test_adding_only_what_fits_never_exceeds_totals(
    asks: list[tuple[str, int, int]], ratio: float
) -> None:
    t = totals(shared_cpu_ratio=ratio)
    used = Usage()
    for kind, cpus, memory in asks:
        ask = Ask(cpu_kind=kind, cpus=cpus, memory_mb=memory)
        if fits(t, used, ask):
            used = used.plus(t, ask)
        assert used.millicpus <= t.millicpus
        assert used.memory_mb <= t.memory_mb


def test_wire_round_trip() -> None:
    t = totals(gpus={"a100": 1}, cpu_kinds=("performance",))
    assert Totals.from_row(t.row()) == t
    u = Usage(millicpus=5, memory_mb=6, disk_gb=7, gpus={"a100": 1})
    assert Usage.from_row(u.row()) == u
    a = Ask(cpu_kind="performance", cpus=2, memory_mb=512, disk_gb=1, gpus=1, gpu_kind="a100")
    assert Ask.from_wire(a.to_wire()) == a


def test_a_pinned_ask_is_given_back_to_the_gpu_kind_it_took() -> None:
    totals = Totals(cpus=8, memory_mb=8192, gpus={"a100": 2, "h100": 2})
    used = Usage(gpus={"a100": 2})
    ask = Ask(cpus=1, memory_mb=256, gpus=1).pinned(totals, used)
    assert ask.gpu_kind == "h100"
    after = used.plus(totals, ask)
    assert after.gpus == {"a100": 2, "h100": 1}
    assert after.minus(totals, ask).gpus == {"a100": 2, "h100": 0}


@given(st.integers(0, 16), st.integers(0, 4096), st.integers(1, 8), st.integers(1, 4096))
def test_minus_undoes_plus(cpus_used: int, mb_used: int, cpus: int, mb: int) -> None:
    totals = Totals(cpus=16, memory_mb=8192)
    used = Usage(millicpus=cpus_used * 1000, memory_mb=mb_used)
    ask = Ask(cpu_kind="performance", cpus=cpus, memory_mb=mb)
    assert used.plus(totals, ask).minus(totals, ask) == used
