"""A drain's walk: its moves asked one at a time in the plan's order, a started machine
waited for until it is healthy before the next, progress with an ETA after each; a refused
move is reported and the walk goes on, and a machine that does not come back healthy
stops it."""

from __future__ import annotations

from bodega.drain.core.plan import Move
from bodega.drain.steps import Progress, walk
from bodega.model.errors import Conflict
from bodega.model.machine import CheckStatus, Machine
from tests.unit.drain.fleet_kit import unit


class FakeMover:
    """The move route and a machine's answer, with checks that pass after ``polls``
    reads, and machines whose move is refused."""

    def __init__(self, polls: int = 1, refused: frozenset[str] = frozenset(),
                 never_healthy: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, str, str, str]] = []
        self.polls, self.refused, self.never_healthy = polls, refused, never_healthy
        self.reads: dict[str, int] = {}
        self.now = 0.0

    def answer(self, machine_id: str, status: str) -> Machine:
        return Machine(id=machine_id, state="started",
                       checks=[CheckStatus(name="http", status=status)])

    async def move(self, app: str, machine_id: str, worker: str, reason: str) -> Machine:
        self.calls.append(("move", app, machine_id, worker))
        self.now += 2.0
        if machine_id in self.refused:
            raise Conflict("failed_precondition: machine is leased")
        return self.answer(machine_id, "critical")

    async def machine(self, app: str, machine_id: str) -> Machine:
        self.calls.append(("get", app, machine_id, ""))
        self.reads[machine_id] = self.reads.get(machine_id, 0) + 1
        passing = self.reads[machine_id] >= self.polls and machine_id not in self.never_healthy
        return self.answer(machine_id, "passing" if passing else "critical")

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


MOVES = [Move(unit("a", "web", "ams-1"), "ams-2", "best fit"),
         Move(unit("b", "web", "ams-1"), "ams-3", "best fit"),
         Move(unit("s", "api", "ams-1", state="stopped"), "ams-2", "best fit")]


async def test_moves_go_one_at_a_time_each_started_one_waited_for_until_healthy() -> None:
    mover = FakeMover(polls=2)
    heard: list[Progress] = []
    done = await walk(MOVES, mover, "drain of ams-1", heard.append, clock=lambda: mover.now,
                      sleep=mover.sleep)
    assert [c for c in mover.calls if c[0] == "move"] == [
        ("move", "web", "a", "ams-2"), ("move", "web", "b", "ams-3"),
        ("move", "api", "s", "ams-2")]
    # a's checks pass before b is moved; the stopped machine is not waited for
    assert mover.calls.index(("get", "web", "a", "")) < mover.calls.index(
        ("move", "web", "b", "ams-3"))
    assert ("get", "api", "s", "") not in mover.calls
    assert [(p.done, p.total) for p in heard] == [(1, 3), (2, 3), (3, 3)]
    assert heard[0].seconds == 3.0  # the move's 2 s and two polls of 0.5 s
    assert heard[0].eta == 6.0
    assert heard[-1].eta == 0.0
    assert (len(done.moved), done.failed, done.stopped) == (3, [], None)


async def test_a_refused_move_is_reported_and_the_walk_goes_on() -> None:
    mover = FakeMover(refused=frozenset({"a"}))
    done = await walk(MOVES, mover, "drain", clock=lambda: mover.now, sleep=mover.sleep)
    assert [m.unit.id for m in done.moved] == ["b", "s"]
    assert [(m.unit.id, "leased" in why) for m, why in done.failed] == [("a", True)]


async def test_a_machine_that_does_not_come_back_healthy_stops_the_walk() -> None:
    mover = FakeMover(never_healthy=frozenset({"a"}))
    done = await walk(MOVES, mover, "drain", healthy_within=0.05, clock=lambda: mover.now)
    assert [m.unit.id for m, _ in done.failed] == ["a"]
    assert done.moved == []
    assert done.stopped is not None
    assert "not healthy on ams-2" in done.stopped


CHECKED = {"image": "x", "checks": {"h": {"type": "http", "port": 8080, "path": "/"}}}


class Unreported(FakeMover):
    """A machine with a check configured whose first result comes at the third read, or
    one that is failed on its new worker."""

    def __init__(self, state: str = "started") -> None:
        super().__init__()
        self.state = state

    def answer(self, machine_id: str, status: str) -> Machine:
        reads = self.reads.get(machine_id, 0)
        checks = [{"name": "h", "status": "passing"}] if reads >= 3 else None
        return Machine.model_validate({"id": machine_id, "state": self.state,
                                       "config": CHECKED, "checks": checks})


async def test_a_check_configured_but_not_reported_yet_is_waited_for() -> None:
    mover = Unreported()
    done = await walk(MOVES[:1], mover, "drain", clock=lambda: mover.now, sleep=mover.sleep)
    assert mover.reads == {"a": 3}
    assert len(done.moved) == 1


async def test_a_machine_failed_on_its_new_worker_stops_the_walk_at_once() -> None:
    mover = Unreported(state="failed")
    done = await walk(MOVES, mover, "drain", clock=lambda: mover.now, sleep=mover.sleep)
    assert [m.unit.id for m, _ in done.failed] == ["a"]
    assert done.stopped is not None
    assert "it is failed there" in done.stopped
    assert mover.reads == {}
