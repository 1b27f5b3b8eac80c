"""The replication core between a few replicas, by hand: writes, sync, tombstones, repairs."""

from __future__ import annotations

import shutil
from pathlib import Path

from bodega.registry.membership.core.buckets import bucket_of
from bodega.registry.replication.core.known import Known
from bodega.registry.replication.replica import AUDIT_PEERS, Replica
from bodega.registry.replication.view import View
from tests.unit.registry.replication.row_kit import (
    EPOCH,
    Wall,
    app_doc,
    machine_doc,
    replica,
    row,
    worker_doc,
)


def behind(r: Replica) -> bool:
    """Whether ``r`` saw rows of its own past and wants a sync (read through a call: the
    flag changes behind mypy's back)."""
    return r.lost_tail


def urgent(r: Replica) -> bool:
    """Whether ``r`` pulls at the pacer's next look whatever its gaps (through a call, as
    ``behind``)."""
    return r.urgent


def auditing(r: Replica) -> bool:
    """Whether ``r`` still audits its past (through a call, as ``behind``)."""
    return r.full_sync


def pull(client: Replica, server: Replica, max_rows: int = 2000) -> None:
    client.apply_reply(server.serve(client.sync_request(), max_rows=max_rows))


def test_writes_take_the_next_version_and_unchanged_writes_are_free() -> None:
    r = replica("w1")
    base = r.counter
    assert base == int(EPOCH * 1_000_000)  # a new replica numbers from its wall clock
    change = r.write("workers", "w1", worker_doc("w1"), shared=False)
    assert change is not None
    assert change.local
    assert change.new is not None
    assert change.new.version == base + 1
    assert r.counter == base + 1
    assert r.write("workers", "w1", worker_doc("w1"), shared=False) is None
    assert r.write("machines", "m9", None, shared=False) is None  # nothing to delete
    r.write("machines", "m1", machine_doc("m1", "w1"), shared=False)
    r.write("machines", "m1", None, shared=False)
    assert r.counter == base + 3
    assert r.view.get("machines", "m1") is not None  # a tombstone, kept for the TTL
    assert r.write("machines", "m1", None, shared=False) is None


def test_sync_ships_exactly_what_is_missing_and_vouches_for_it() -> None:
    a, b = replica("a"), replica("b")
    base = a.counter
    for i in range(5):
        a.write("apps", f"app{i}", app_doc(f"app{i}"), shared=True)
    a.write("apps", "app0", app_doc("app0", "other"), shared=True)  # supersedes base + 1
    reply = a.serve(b.sync_request())
    assert sorted(r.version - base for r in reply.rows) == [2, 3, 4, 5, 6]
    assert reply.vouched == {"a": [(1, base + 6)]}  # everything below was never written
    b.apply_reply(reply)
    assert b.known()["a"] == Known(base + 6)
    assert b.view.all_rows() == a.view.all_rows()
    assert a.serve(b.sync_request()).rows == []  # nothing more to say


def test_a_reply_over_budget_vouches_only_for_what_it_carries() -> None:
    a, b = replica("a"), replica("b")
    base = a.counter
    for i in range(10):
        a.write("apps", f"app{i}", app_doc(f"app{i}"), shared=True)
    reply = a.serve(b.sync_request(), max_rows=4)
    assert len(reply.rows) == 4
    assert reply.vouched == {"a": [(1, base + 4)]}
    b.apply_reply(reply)
    assert b.known()["a"] == Known(base + 4)
    pull(b, a, max_rows=4)
    pull(b, a, max_rows=4)
    assert b.view.all_rows() == a.view.all_rows()


def test_gossip_out_of_order_leaves_a_gap_that_sync_fills() -> None:
    a, b = replica("a"), replica("b")
    rows = []
    for i in range(4):
        change = a.write("apps", f"app{i}", app_doc(f"app{i}"), shared=True)
        assert change is not None
        assert change.new is not None
        rows.append(change.new)
    base = rows[0].version - 1
    b.apply([rows[3]])
    assert b.known()["a"].gaps == ((1, base + 3),)
    b.apply([rows[1]])
    assert b.known()["a"].gaps == ((1, base + 1), (base + 3, base + 3))
    assert b.gaps() == {"a": ((1, base + 1), (base + 3, base + 3))}
    assert not urgent(b)  # gossip may fill those gaps: the pacer's GapWatch decides
    b.notice("a", base + 6)  # a row too large for gossip: only its version travelled
    assert b.known()["a"].gaps == ((1, base + 1), (base + 3, base + 3), (base + 5, base + 6))
    assert urgent(b)  # only a pull brings a noticed row
    for i in range(4, 6):
        a.write("apps", f"app{i}", app_doc(f"app{i}"), shared=True)
    pull(b, a)
    assert b.missing() == {}
    assert b.gaps() == {}
    assert not urgent(b)


def test_a_reply_to_a_request_made_before_a_notice_leaves_the_notice_urgent() -> None:
    a, b = replica("a"), replica("b")
    a.write("apps", "app0", app_doc("app0"), shared=True)
    request = b.sync_request()
    b.notice("a", a.counter + 5)  # a notice lands while the pull is on its way
    b.apply_reply(a.serve(request))
    assert urgent(b)  # that reply could not have brought the noticed row
    pull(b, a)
    assert not urgent(b)
    assert b.view.all_rows() == a.view.all_rows()


def test_tombstones_are_purged_after_the_ttl_only() -> None:
    wall = Wall()
    r = replica("w1", wall, ttl=100)
    r.write("machines", "m1", machine_doc("m1", "w1"), shared=False)
    r.write("machines", "m1", None, shared=False)
    r.write("machines", "m2", machine_doc("m2", "w1"), shared=False)
    wall.now += 99
    assert r.purge() == 0
    wall.now += 2
    assert r.purge() == 1
    assert r.view.get("machines", "m1") is None
    assert r.view.get("machines", "m2") is not None
    assert r.horizon("w1") == r.counter - 1  # the tombstone's version


def test_a_replica_away_longer_than_the_ttl_is_reset_instead_of_keeping_ghosts() -> None:
    wall = Wall()
    owner, fresh, stale = replica("w1", wall, ttl=100), replica("f", wall), replica("s", wall)
    owner.write("machines", "m1", machine_doc("m1", "w1"), shared=False)
    owner.write("machines", "m2", machine_doc("m2", "w1"), shared=False)
    pull(stale, owner)  # stale holds m1 and m2, then goes away
    owner.write("machines", "m1", None, shared=False)
    wall.now += 200
    owner.purge()  # the tombstone of m1 is gone: nothing left to tell stale about it
    owner.write("machines", "m3", machine_doc("m3", "w1"), shared=False)
    pull(fresh, owner)  # a new replica is not reset: it holds nothing stale
    assert fresh.view.get("machines", "m1") is None
    reply = owner.serve(stale.sync_request())
    assert reply.reset == ["w1"]
    assert reply.horizons == {"w1": owner.horizon("w1")}
    stale.apply_reply(reply)
    assert stale.view.get("machines", "m1") is None  # the ghost is gone
    assert {r.key for r in stale.view.all_rows()} == {"m2", "m3"}
    assert owner.serve(stale.sync_request()).reset == []  # and it is not reset again
    # what it now holds, it vouches for with the same horizon to others
    late = replica("l", wall)
    pull(late, stale)
    assert late.horizon("w1") == owner.horizon("w1") > 0


def test_a_wiped_node_supersedes_the_rows_of_its_past_life() -> None:
    """Back with an empty view, a node must not reuse versions, nor leave stale rows behind."""
    wall = Wall()
    peer = replica("p", wall)
    old_life = replica("w1", wall)
    old_life.write("workers", "w1", worker_doc("w1", url="old"), shared=False)
    old_life.write("machines", "m1", machine_doc("m1", "w1"), shared=False)
    old_life.write("machines", "m2", machine_doc("m2", "w1"), shared=False)
    pull(peer, old_life)
    wall.now += 30
    new_life = replica("w1", wall)  # same name, empty view
    assert new_life.counter > old_life.counter
    new_life.write("workers", "w1", worker_doc("w1", url="new"), shared=False)
    new_life.write("machines", "m1", machine_doc("m1", "w1", "stopped"), shared=False)
    # gossip alone only raises a flag: sync serves every stale row at once
    stale = peer.view.get("machines", "m2")
    assert stale is not None
    new_life.apply([stale])
    assert behind(new_life)
    changes = [c for c in new_life.apply_reply(peer.serve(new_life.sync_request())) if c.local]
    assert not behind(new_life)
    assert {c.new.key for c in changes if c.new} == {"m2"}  # m1 and w1 already supersede
    pull(peer, new_life)
    assert peer.view.all_rows() == new_life.view.all_rows()
    m2 = peer.view.get("machines", "m2")
    assert m2 is not None
    assert m2.deleted
    assert new_life.serve(peer.sync_request()).rows == []  # and the audit is over


def test_a_wiped_owner_audits_its_past_with_several_peers_not_one() -> None:
    """A peer wiped as well, that took the owner's new floor from gossip before its own
    first sync, holds none of the owner's past yet vouches for all of it: its answer alone
    must not end the audit, or the owner never supersedes a row of its earlier life."""
    wall = Wall()
    holder = replica("p", wall)
    old_life = replica("w1", wall)
    old_life.write("machines", "m-old", machine_doc("m-old", "w1"), shared=False)
    pull(holder, old_life)
    wall.now += 30
    new_life = replica("w1", wall)  # its store is gone
    change = new_life.write("workers", "w1", worker_doc("w1"), shared=False)
    assert change is not None
    assert change.new is not None
    wiped = replica("q", wall)  # gone too, and back: it hears the new life by gossip first
    wiped.apply([change.new], floors={"w1": new_life.floor})
    assert wiped.known_of("w1").covers(1, new_life.floor)
    assert wiped.view.get("machines", "m-old") is None
    for _ in range(2):  # its answer, however often asked, is one peer's
        assert auditing(new_life)
        new_life.apply_reply(wiped.serve(new_life.sync_request()), peer="q", peers=2)
    assert auditing(new_life)
    changes = new_life.apply_reply(holder.serve(new_life.sync_request()), peer="p", peers=2)
    assert not auditing(new_life)
    assert [(c.new.key, c.new.deleted) for c in changes if c.local and c.new] == \
        [("m-old", True)]


def test_an_audit_ends_after_three_peers_or_every_peer_there_is() -> None:
    wall = Wall()
    for peers, needed in ((1, 1), (2, 2), (3, 3), (10, AUDIT_PEERS)):
        node = replica(f"n{peers}", wall)  # new: it audits its past
        for index in range(needed):
            assert auditing(node), (peers, index)
            other = replica(f"o{index}", wall)
            node.apply_reply(other.serve(node.sync_request()), peer=other.name, peers=peers)
        assert not auditing(node), peers
        assert node.settled


def test_a_restart_that_lost_its_last_commits_moves_past_them(tmp_path: Path) -> None:
    """A power loss can take the last commits; peers may have seen them: never reuse them."""
    wall = Wall()
    peer = replica("p", wall)
    node = Replica("w1", View(tmp_path / "a.db"), wall=wall)
    node.write("machines", "m1", machine_doc("m1", "w1"), shared=False)
    node.view.close()
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")  # the store as the power loss left it
    node = Replica("w1", View(tmp_path / "a.db"), wall=wall)
    node.write("machines", "m2", machine_doc("m2", "w1"), shared=False)  # the lost commit
    pull(peer, node)
    node.view.close()
    back = Replica("w1", View(tmp_path / "b.db"), wall=wall)
    lost = back.counter + 1
    assert peer.view.get("machines", "m2") is not None
    changes = back.apply_reply(peer.serve(back.sync_request()))
    assert back.counter > lost  # the next write cannot reuse the lost version
    assert [(c.new.key, c.new.deleted) for c in changes if c.local and c.new] == [("m2", True)]
    back.view.close()


def test_the_counter_and_clock_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "view.db"
    wall = Wall()
    first = Replica("w1", View(path), wall=wall)
    first.write("workers", "w1", worker_doc("w1"), shared=False)
    first.write("apps", "a", app_doc("a"), shared=True)
    stamp = first.clock.last
    first.view.close()
    wall.now -= 60  # the wall clock stepped back while we were down
    second = Replica("w1", View(path), wall=wall)
    assert second.counter == first.counter
    change = second.write("apps", "a", app_doc("a", "changed"), shared=True)
    assert change is not None
    assert change.new is not None
    assert change.new.version == first.counter + 1
    assert (change.new.stamp.wall_ms, change.new.stamp.logical) > stamp
    second.view.close()


def test_shared_rows_converge_on_the_last_writer_everywhere() -> None:
    wall = Wall()
    a, b, c = replica("a", wall), replica("b", wall), replica("c", wall)
    a.write("apps", "web", app_doc("web", "from-a"), shared=True)
    wall.now += 0.001
    b.write("apps", "web", app_doc("web", "from-b"), shared=True)
    c.write("apps", "web", None, shared=True)  # same millisecond as b: c > b breaks the tie
    for _ in range(2):
        for x in (a, b, c):
            for y in (a, b, c):
                if x is not y:
                    pull(x, y)
    assert a.view.all_rows() == b.view.all_rows() == c.view.all_rows()
    held = a.view.get("apps", "web")
    assert held is not None
    assert held.deleted
    assert held.owner == "c"


# ── digests, origins and floors (anti-entropy at fleet scale) ────────────────

def test_a_node_that_never_wrote_is_no_origin_anywhere() -> None:
    reader, writer, other = replica("reader"), replica("writer"), replica("other")
    writer.write("workers", "writer", worker_doc("writer"), shared=False)
    for a, b in ((reader, writer), (writer, reader), (other, reader), (reader, other)):
        pull(a, b)
    assert "reader" not in writer.known()
    assert "reader" not in other.known()
    assert "reader" not in reader.known()
    assert set(other.known()) == {"writer"}


def test_replicas_holding_the_same_versions_exchange_only_their_digests() -> None:
    a, b = replica("a"), replica("b")
    a.write("workers", "a", worker_doc("a"), shared=False)
    b.write("workers", "b", worker_doc("b"), shared=False)
    assert b.compare(a.digest_request()).differ  # a lacks b's row, b lacks a's
    pull(a, b)
    pull(b, a)
    assert b.compare(a.digest_request()).differ == ()
    assert a.compare(b.digest_request()).differ == ()


def test_a_scoped_request_carries_and_is_served_only_the_buckets_that_differ() -> None:
    server, client = replica("server"), replica("client")
    pull(client, replica("empty"))  # its first pull (the audit of its own past) is whole
    rows = [row("machines", f"m{i}", machine_doc(f"m{i}", f"w{i}"), f"w{i}", 1)
            for i in range(200)]
    server.apply(rows)
    client.apply(rows[1:])  # the client lacks only w0's machine
    differ = server.compare(client.digest_request()).differ
    assert differ == (bucket_of("w0"),)
    request = client.sync_request(differ)
    assert set(request.known) == {o for o in client.known() if bucket_of(o) == bucket_of("w0")}
    reply = server.serve(request)
    assert [r.key for r in reply.rows] == ["m0"]
    client.apply_reply(reply)
    assert server.compare(client.digest_request()).differ == ()


def test_a_new_origin_heard_with_its_floor_leaves_no_gap_to_pull() -> None:
    w, r = replica("w"), replica("r")
    change = w.write("workers", "w", worker_doc("w"), shared=False)
    assert change is not None
    assert change.new is not None
    r.apply([change.new])  # without the floor: every version below looks missing
    assert r.missing() == {"w": w.floor}
    fresh = replica("r2")
    fresh.apply([change.new], floors={"w": w.floor})
    assert fresh.missing() == {}
    assert not fresh.behind


def test_a_reply_cut_at_its_budget_makes_the_requester_pull_again_soon() -> None:
    a, b = replica("a"), replica("b")
    for i in range(5):
        a.write("apps", f"app{i}", app_doc(f"app{i}"), shared=True)
    b.apply_reply(a.serve(b.sync_request(), max_rows=2))
    assert b.behind  # more to come: the pacer pulls every quarter interval
    b.apply_reply(a.serve(b.sync_request(), max_rows=10))
    assert not b.behind

