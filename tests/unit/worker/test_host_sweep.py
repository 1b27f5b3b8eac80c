"""Kernel object names carry the cluster id; a sweep takes its own cluster's and no other's.

Pure: names from ``host_names``, and what ``host_sweep.owned`` and ``legacy`` pick
from a survey given to them (no host is read).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.runtime import cluster_id
from bodega.worker.host.core.names import HostNames, Owner, Subnet
from bodega.worker.host.survey import Link, Survey
from bodega.worker.host.sweep import legacy, owned, union

A, B = HostNames("kq3x9"), HostNames("m0zz1")
NET = ipaddress.ip_network("10.209.1.0/24")
OTHER_NET = ipaddress.ip_network("10.209.2.0/24")
CGROUP = Path("/sys/fs/cgroup")


def objects_of(names: HostNames, net: Subnet, worker: str) -> Survey:
    """What a worker of cluster ``names`` makes: two namespaces, their veths, a bridge,
    cgroups in two controllers and runc state."""
    scope = names.cgroup_scope(worker)
    return Survey(
        namespaces=(names.namespace(net, 2), names.namespace(net, 3)),
        links=(Link(names.bridge(net), None, True),
               Link(names.veth(net, 2), names.bridge(net), False),
               Link(names.veth(net, 3), names.bridge(net), False)),
        markers=(names.namespace(net, 2),),
        scopes=(CGROUP / "memory" / "bodega" / scope, CGROUP / "cpu" / "bodega" / scope),
        runc_states=(Path("/run/bodega/runc") / scope,),
    )


def merged(*surveys: Survey) -> Survey:
    return Survey(*(tuple(x for s in surveys for x in getattr(s, field))
                    for field in ("namespaces", "links", "markers", "scopes", "runc_states",
                                  "mounts")))


LEGACY = Survey(
    namespaces=("bodega-209-1-2", "bodega-209-1-3", "bodega-209-7-2"),
    links=(Link("bdg-209-1", None, True), Link("bv209-1-2", "bdg-209-1", False),
           Link("bv209-1-3", "bdg-209-1", False), Link("bdg-209-7", None, True),
           Link("bv209-7-2", "bdg-209-7", False), Link("eth0", None, False),
           Link("btb12", None, True)),
    markers=("bodega-209-1-2", "bodega-209-9-4"),
    scopes=(CGROUP / "memory" / "bodega" / "ams-1", CGROUP / "memory" / "bodega" / "syd-1"),
    runc_states=(Path("/run/bodega/runc/ams-1"),),
)


def test_names_carry_the_cluster_id_and_fit_linux_interface_names() -> None:
    widest = ipaddress.ip_network("10.255.255.0/24")
    assert A.namespace(NET, 5) == "bodega-kq3x9-209-1-5"
    assert A.bridge(NET) == "bdgkq3x9d101"
    assert A.veth(NET, 5) == "bvkq3x9d10105"
    assert A.cgroup_scope("ams-1") == "kq3x9-ams-1"
    assert len(A.bridge(widest)) <= 15
    assert len(A.veth(widest, 254)) <= 15
    # One subnet in two clusters: nothing in common (no adoption, no removal).
    assert {A.namespace(NET, 2), A.bridge(NET), A.veth(NET, 2)}.isdisjoint(
        {B.namespace(NET, 2), B.bridge(NET), B.veth(NET, 2)})


def test_a_cluster_sweep_takes_its_own_objects_and_leaves_another_clusters() -> None:
    mine = merged(objects_of(A, NET, "ams-1"), objects_of(A, OTHER_NET, "ams-2"))
    theirs = merged(objects_of(B, NET, "ams-1"), LEGACY)
    taken = owned(merged(mine, theirs), Owner(A))
    assert sorted(taken.namespaces) == sorted(mine.namespaces)
    assert set(taken.links) == {link.name for link in mine.links}
    assert taken.links[-2:] == tuple(sorted([A.bridge(NET), A.bridge(OTHER_NET)]))  # last
    assert set(taken.scopes) == set(mine.scopes)
    assert set(taken.runc_states) == set(mine.runc_states)
    assert taken.markers == mine.markers
    assert taken.kill


def test_a_worker_sweep_takes_only_its_subnet_and_scope() -> None:
    first, second = objects_of(A, NET, "ams-1"), objects_of(A, OTHER_NET, "ams-2")
    worker = Owner(A, subnet=NET, scope=A.cgroup_scope("ams-1"))
    taken = owned(merged(first, second), worker)
    assert taken.namespaces == first.namespaces
    assert set(taken.links) == {link.name for link in first.links}
    assert taken.scopes == first.scopes


def test_a_joined_hosts_workers_take_theirs_together_and_not_another_hosts() -> None:
    """A joined host's workers, on a kernel it shares with another host of the cluster."""
    here = [(NET, "syd-1"), (OTHER_NET, "syd-2")]
    elsewhere = objects_of(A, ipaddress.ip_network("10.209.3.0/24"), "ams-1")
    found = merged(*(objects_of(A, net, name) for net, name in here), elsewhere)
    data = Path("/srv/host2")
    mount = data / "workers" / "syd-1" / "machines" / "m1" / "root"
    found = merged(found, Survey(mounts=(mount,)))
    taken = union(owned(found, Owner(A, subnet=net, scope=A.cgroup_scope(name)), data)
                  for net, name in here)
    mine = merged(*(objects_of(A, net, name) for net, name in here))
    assert taken.namespaces == tuple(sorted(mine.namespaces))
    assert set(taken.links) == {link.name for link in mine.links}
    assert taken.links[-2:] == tuple(sorted([A.bridge(NET), A.bridge(OTHER_NET)]))  # last
    assert set(taken.scopes) == set(mine.scopes)
    assert set(taken.runc_states) == set(mine.runc_states)
    assert taken.mounts == (mount,)  # once, though both workers' sweeps found it
    assert taken.kill
    assert not union([])


def test_a_starting_cluster_takes_what_its_workers_will_not_take_up() -> None:
    """``bodega up`` again with fewer workers: ams-2's objects go, machines and mounts
    included; ams-1, which starts again and re-adopts its machines, keeps every one."""
    data = Path("/srv/cluster")
    kept = merged(objects_of(A, NET, "ams-1"),
                  Survey(mounts=(data / "workers" / "ams-1" / "machines" / "m1" / "rootfs",)))
    gone = merged(objects_of(A, OTHER_NET, "ams-2"),
                  Survey(mounts=(data / "workers" / "ams-2" / "machines" / "m2" / "rootfs",)))
    found = merged(kept, gone, objects_of(B, OTHER_NET, "ams-2"))
    theirs = owned(found, Owner(A, subnet=NET, scope=A.cgroup_scope("ams-1")),
                   data / "workers" / "ams-1")
    taken = owned(found, Owner(A), data).without(theirs)
    assert sorted(taken.namespaces) == sorted(gone.namespaces)
    assert set(taken.links) == {link.name for link in gone.links}
    assert set(taken.scopes) == set(gone.scopes)
    assert set(taken.runc_states) == set(gone.runc_states)
    assert taken.markers == gone.markers
    assert taken.mounts == gone.mounts
    assert taken.kill
    assert not owned(kept, Owner(A), data).without(theirs)


def test_mounts_swept_are_machines_under_the_data_dir_never_the_dir_itself() -> None:
    data = Path("/srv/cluster")
    survey = Survey(mounts=(
        data, data / "workers" / "ams-1",  # a tmpfs the operator put there: not ours
        data / "workers" / "ams-1" / "machines" / "m1" / "oci" / "rootfs",
        Path("/srv/other/machines/m2/oci/rootfs"), Path("/run/netns")))
    taken = owned(survey, Owner(A), data)
    assert taken.mounts == (data / "workers" / "ams-1" / "machines" / "m1" / "oci" / "rootfs",)
    assert owned(survey, Owner(A)).mounts == ()


@given(st.from_regex(cluster_id.PATTERN, fullmatch=True),
       st.from_regex(cluster_id.PATTERN, fullmatch=True),
       st.integers(0, 255), st.integers(0, 255), st.integers(2, 254),
       st.integers(0, 255), st.integers(0, 255), st.integers(2, 254))
def test_no_cluster_ever_takes_anothers_object(a: str, b: str, b1: int, c1: int, i1: int,
                                               b2: int, c2: int, i2: int) -> None:
    if a == b:
        return
    one, two = HostNames(a), HostNames(b)
    net1 = ipaddress.ip_network(f"10.{b1}.{c1}.0/24")
    net2 = ipaddress.ip_network(f"10.{b2}.{c2}.0/24")
    theirs = [two.namespace(net2, i2), two.bridge(net2), two.veth(net2, i2)]
    for owner in (Owner(one), Owner(one, subnet=net1, scope=one.cgroup_scope("w"))):
        assert not owner.namespace(theirs[0])
        assert not owner.link(theirs[1])
        assert not owner.link(theirs[2])
        assert not owner.cgroup_scope(two.cgroup_scope("w"))
    assert len(two.veth(net2, i2)) <= 15


def test_legacy_takes_old_names_nothing_uses_and_never_an_ids() -> None:
    survey = merged(LEGACY, objects_of(A, NET, "ams-1"))
    taken = legacy(survey, busy_namespaces=set(), busy_scopes=set(), live_octets=set(),
                   live_scopes=set())
    assert taken.namespaces == ("bodega-209-1-2", "bodega-209-1-3", "bodega-209-7-2")
    assert taken.links == ("bv209-1-2", "bv209-1-3", "bv209-7-2", "bdg-209-1", "bdg-209-7")
    assert taken.markers == ("bodega-209-1-2", "bodega-209-9-4")  # 209-9-4: its netns is gone
    assert [s.name for s in taken.scopes] == ["ams-1", "syd-1"]
    assert not taken.kill  # nothing in use is taken, so nothing is killed


def test_legacy_keeps_what_a_process_or_a_running_cluster_uses() -> None:
    taken = legacy(LEGACY, busy_namespaces={"bodega-209-1-3"}, busy_scopes={"ams-1"},
                   live_octets={(209, 7)}, live_scopes={"syd-1"})
    assert taken.namespaces == ("bodega-209-1-2",)
    # bdg-209-1 still has a port (the busy namespace's veth): it stays, as does 209-7's.
    assert taken.links == ("bv209-1-2",)
    assert taken.scopes == ()
    assert taken.runc_states == ()


@pytest.mark.parametrize("text", ["", "abcd", "1bcde", "ABCDE", "abcdef", "ab-de"])
def test_a_malformed_cluster_id_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="cluster id"):
        HostNames(text)


def test_a_data_dir_keeps_the_id_it_was_given_first(tmp_path: Path) -> None:
    made = cluster_id.ensure(tmp_path / "d")
    assert cluster_id.valid(made)
    assert cluster_id.ensure(tmp_path / "d") == made == cluster_id.read(tmp_path / "d")
    assert cluster_id.read(tmp_path / "other") is None
    (tmp_path / "d" / cluster_id.FILE).write_text("nonsense\n")
    with pytest.raises(ValueError, match="not a cluster id"):
        cluster_id.read(tmp_path / "d")
