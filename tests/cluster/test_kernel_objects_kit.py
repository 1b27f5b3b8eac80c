"""The leftovers test's before/after comparison, on snapshots made by hand (pure)."""

from __future__ import annotations

from .kernel_objects_kit import Snapshot, unexplained

PARENTS = ("cpu/bodega", "freezer/bodega", "memory/bodega")


def cgroups(*names: str) -> Snapshot:
    none: frozenset[str] = frozenset()
    return Snapshot(namespaces=none, links=none, nft_tables=none, mounts=none,
                    cgroups=frozenset(names), run_files=none)


def test_shared_parents_removed_by_another_cluster_meanwhile_are_explained() -> None:
    # Another test's worker had emptied them before ours started, and removed them after.
    assert unexplained(cgroups(*PARENTS), cgroups(), ["ours"]) == {}


def test_a_shared_parent_left_with_nothing_under_it_is_not_explained() -> None:
    assert unexplained(cgroups(), cgroups("memory/bodega"), ["ours"]) == {
        "cgroups": ["memory/bodega"]}


def test_a_parent_another_clusters_scope_holds_is_explained() -> None:
    after = cgroups("memory/bodega", "memory/bodega/theirs")
    assert unexplained(cgroups(), after, ["ours"]) == {}


def test_our_own_scope_is_never_explained_away() -> None:
    before = cgroups("memory/bodega", "memory/bodega/theirs")
    after = cgroups("memory/bodega", "memory/bodega/theirs", "memory/bodega/ours-1")
    assert unexplained(before, after, ["ours-1"]) == {"cgroups": ["memory/bodega/ours-1"]}


def objects(links: tuple[str, ...] = (), tables: tuple[str, ...] = ()) -> Snapshot:
    none: frozenset[str] = frozenset()
    return Snapshot(namespaces=none, links=frozenset(links), nft_tables=frozenset(tables),
                    mounts=none, cgroups=none, run_files=none)


def test_another_clusters_overlay_and_fences_are_explained_and_ours_are_not() -> None:
    theirs = ("table inet bodega6pn_other_b601", "table bridge bodegafence_other_b601")
    ours = ("table inet bodegafence_ours1_0101",)
    after = objects(("bwgotherb601", "bwgours10101"), theirs + ours)
    assert unexplained(objects(), after, ["ours1"]) == {
        "links": ["bwgours10101"], "nft_tables": list(ours)}
    # A table no bodega cluster names is never someone else's.
    assert unexplained(objects(), objects(tables=("table inet filter",)), ["ours1"]) == {
        "nft_tables": ["table inet filter"]}
