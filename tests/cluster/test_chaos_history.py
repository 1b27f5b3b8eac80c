"""Each chaos history check reports the history that breaks its rule."""

from __future__ import annotations

import pytest

from tests.cluster.chaos import history
from tests.cluster.chaos.state import Violation


def request(outcome: str = "200", *, kind: str = "get", host: str = "host1",
            start: float = 30.0, lasts: float = 2.0) -> history.Request:
    return history.Request(kind=kind, host=host, start=start, end=start + lasts,
                           outcome=outcome)


def proxied(outcome: str = "200", *, host: str = "host1",
            start: float = 30.0) -> history.Request:
    return request(outcome, kind="proxy", host=host, start=start, lasts=0.5)


def fault(kind: str = "host-kill", host: str | None = "host1", start: float = 10.0,
          end: float = 20.0) -> history.Fault:
    return history.Fault(kind=kind, host=host, start=start, end=end)


def task(index: int, state: str = "succeeded",
         exit_codes: list[int | None] | None = None) -> history.TaskOutcome:
    codes: list[int | None] = [0] if exit_codes is None else exit_codes
    return history.TaskOutcome(index=index, state=state, exit_codes=codes)


def job(state: str | None = "succeeded", *, tasks: list[history.TaskOutcome] | None = None,
        acknowledged: bool = True, name: str = "j1") -> history.JobOutcome:
    return history.JobOutcome(name=name, acknowledged=acknowledged, state=state,
                              tasks=[task(0), task(1)] if tasks is None else tasks)


def inventory() -> history.Inventory:
    """A host as a run finds it: something of every kind already there."""
    return history.Inventory(namespaces=["host1"], links=["eth0", "lo"],
                             nft_tables=["inet filter"], mounts=["/ /dev/sda1"],
                             machine_processes=["1 init"])


def kinds(violations: list[Violation]) -> list[str]:
    return [v.invariant for v in violations]


# --- a healthy history ---------------------------------------------------------------


def test_a_healthy_history_has_no_violation() -> None:
    faults = [fault("host-kill", "host2", 10.0, 20.0), fault("proxy-kill", "host3", 40.0, 40.0),
              fault("key-rotate", None, 50.0, 50.0)]
    requests = [request("200"), request("201", kind="create", host="host3"),
                request("503", kind="start", host="host1"),
                request("timeout", host="host2", start=18.0),  # host2 was killed
                *[proxied(host="host1", start=30.0 + i) for i in range(9)],
                proxied("502", host="host3", start=41.0),  # host3's proxy was killed
                proxied("reset", host="host4", start=60.0)]  # 1 of 10 live: within 10%
    assert history.api_answered(requests, faults) == []
    assert history.proxy_budget(requests, faults, 0.1) == []
    assert history.converged(12.5, 60.0) == []
    assert history.jobs_once([job(), job(name="j2", tasks=[task(0, exit_codes=[1, None, 0])]),
                              job(None, acknowledged=False, name="j3")]) == []
    assert history.kernel_clean(inventory(), inventory()) == []


# --- the window a fault excuses ------------------------------------------------------


@pytest.mark.parametrize(("start", "end", "disturbed"), [
    (8.0, 9.9, False),  # over before the fault began
    (8.0, 10.0, True),  # ends as it begins
    (8.0, 30.0, True),  # spans it
    (12.0, 13.0, True),  # inside it
    (24.0, 26.0, True),  # inside the grace after the heal
    (25.0, 26.0, True),  # starts as the grace ends
    (25.1, 26.0, False),  # starts after the grace
])
def test_a_fault_disturbs_its_host_from_its_start_until_grace_after_its_end(
        start: float, end: float, disturbed: bool) -> None:
    assert history.GRACE == 5.0  # the cases above are for [10, 20 + 5]
    faults = [fault("link-down", "host1", 10.0, 20.0)]
    assert history._disturbed(faults, history.API_DOWN, "host1", start, end) is disturbed


def test_a_fault_disturbs_only_its_own_host_and_only_under_the_kinds_asked() -> None:
    faults = [fault("host-kill", "host1", 10.0, 20.0), fault("key-rotate", None, 10.0, 10.0)]
    assert not history._disturbed(faults, history.API_DOWN, "host2", 12.0, 13.0)
    assert not history._disturbed(faults, frozenset({"proxy-kill"}), "host1", 12.0, 13.0)
    assert not history._disturbed([fault("key-rotate", None)], frozenset({"key-rotate"}),
                                  "host1", 12.0, 13.0)


# --- api_answered ---------------------------------------------------------------------


def test_an_unanswered_request_to_a_host_under_no_fault_is_a_violation() -> None:
    found = history.api_answered([request("timeout", kind="stop", start=30.0, lasts=10.0)], [])
    assert kinds(found) == ["api-answered"]
    assert found[0].detail == (
        "stop to host1 at 30.0s: timeout after 10.0s, with no fault on that host")


@pytest.mark.parametrize("outcome", sorted(history.UNANSWERED))
def test_every_unanswered_outcome_is_a_violation(outcome: str) -> None:
    found = history.api_answered([request(outcome)], [])
    assert kinds(found) == ["api-answered"]
    assert f": {outcome} after" in found[0].detail


@pytest.mark.parametrize("kind", sorted(history.API_DOWN))
def test_an_unanswered_request_to_a_host_whose_api_was_down_is_excused(kind: str) -> None:
    faults = [fault(kind, "host1", 10.0, 20.0)]
    assert history.api_answered([request("timeout", start=15.0)], faults) == []
    assert history.api_answered([request("refused", start=24.0)], faults) == []  # in the grace


def test_an_unanswered_request_that_began_before_the_fault_and_ran_into_it_is_excused() -> None:
    faults = [fault("broker-kill", "host1", 10.0, 10.0)]  # an instant one
    assert history.api_answered([request("timeout", start=5.0, lasts=6.0)], faults) == []


@pytest.mark.parametrize("kind", ["loss-one-way", "proxy-kill", "worker-stop", "disk-full",
                                  "agent-kill", "wg-peer-remove"])
def test_a_fault_that_leaves_the_api_up_excuses_no_unanswered_request(kind: str) -> None:
    found = history.api_answered([request("timeout", start=15.0)],
                                 [fault(kind, "host1", 10.0, 20.0)])
    assert kinds(found) == ["api-answered"]
    assert "to host1 at 15.0s" in found[0].detail


def test_an_api_down_fault_on_another_host_excuses_no_unanswered_request() -> None:
    found = history.api_answered([request("reset", host="host1", start=15.0)],
                                 [fault("host-kill", "host2", 10.0, 20.0)])
    assert kinds(found) == ["api-answered"]
    assert "get to host1 at 15.0s: reset" in found[0].detail


def test_a_cluster_wide_fault_excuses_no_unanswered_request() -> None:
    found = history.api_answered([request("timeout", start=10.0)],
                                 [fault("key-rotate", None, 10.0, 10.0)])
    assert kinds(found) == ["api-answered"]


def test_an_unanswered_request_just_after_the_grace_is_a_violation() -> None:
    faults = [fault("host-kill", "host1", 10.0, 20.0)]
    late = 20.0 + history.GRACE + 0.1
    found = history.api_answered([request("timeout", start=late)], faults)
    assert kinds(found) == ["api-answered"]
    assert "at 25.1s" in found[0].detail
    assert history.api_answered([request("timeout", start=20.0 + history.GRACE)], faults) == []


def test_an_unanswered_request_that_ended_before_the_fault_began_is_a_violation() -> None:
    faults = [fault("host-kill", "host1", 10.0, 20.0)]
    found = history.api_answered([request("timeout", start=5.0, lasts=4.9)], faults)
    assert kinds(found) == ["api-answered"]
    assert "at 5.0s: timeout after 4.9s" in found[0].detail


@pytest.mark.parametrize("outcome", ["503", "500", "404", "409"])
def test_an_error_status_is_an_answer(outcome: str) -> None:
    assert history.api_answered([request(outcome)], []) == []


def test_proxy_requests_are_not_judged_by_api_answered() -> None:
    assert history.api_answered([proxied("timeout"), proxied("refused")], []) == []


def test_each_unanswered_request_is_its_own_violation() -> None:
    requests = [request("timeout", host="host1"), request("200", host="host2"),
                request("error", host="host3")]
    found = history.api_answered(requests, [])
    assert kinds(found) == ["api-answered", "api-answered"]
    assert "to host1" in found[0].detail
    assert "to host3" in found[1].detail


# --- proxy_failures and proxy_budget --------------------------------------------------


def test_proxy_failures_count_only_proxy_requests_to_live_proxies() -> None:
    faults = [fault("proxy-kill", "host2", 10.0, 10.0), fault("broker-kill", "host3", 10.0, 10.0)]
    requests = [proxied("200", host="host1", start=12.0),
                proxied("503", host="host1", start=13.0),  # any status but 200 is a failure
                proxied("timeout", host="host2", start=12.0),  # its proxy was killed
                proxied("timeout", host="host2", start=15.0),  # ...and still in the grace
                proxied("timeout", host="host2", start=15.1),  # past it
                proxied("reset", host="host3", start=12.0),  # a broker-kill leaves the proxy
                request("timeout", host="host1")]  # not a proxy request
    assert history.proxy_failures(requests, faults) == (4, 3)


def test_proxy_budget_at_exactly_the_budget_passes() -> None:
    requests = [proxied("502"), *[proxied() for _ in range(9)]]  # 1 of 10 failed
    assert history.proxy_budget(requests, [], 0.1) == []


def test_proxy_budget_one_failure_over_the_budget_is_a_violation() -> None:
    requests = [proxied("502"), proxied("timeout"), *[proxied() for _ in range(8)]]
    found = history.proxy_budget(requests, [], 0.1)
    assert kinds(found) == ["proxy-budget"]
    assert found[0].detail.startswith("2 of 10 requests through live proxies failed")
    assert "budget 10.0% (1)" in found[0].detail
    assert "'502': 1" in found[0].detail
    assert "'timeout': 1" in found[0].detail


def test_proxy_budget_leaves_the_failures_of_a_down_proxy_out_of_its_detail() -> None:
    faults = [fault("host-kill", "host2", 10.0, 20.0)]
    requests = [proxied("502", host="host1"), proxied("timeout", host="host2", start=15.0)]
    found = history.proxy_budget(requests, faults, 0.0)
    assert kinds(found) == ["proxy-budget"]
    assert "1 of 1 requests" in found[0].detail
    assert "timeout" not in found[0].detail


def test_no_request_to_a_live_proxy_is_a_violation() -> None:
    found = history.proxy_budget([request("200")], [], 0.5)  # API requests only
    assert kinds(found) == ["proxy-budget"]
    assert found[0].detail == "no request reached a live proxy"
    down = [fault("proxy-kill", "host1", 10.0, 10.0)]
    assert kinds(history.proxy_budget([proxied(start=12.0)], down, 0.5)) == ["proxy-budget"]


# --- converged ------------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [0.0, 30.0, 60.0])
def test_views_that_agreed_within_the_bound_pass(seconds: float) -> None:
    assert history.converged(seconds, 60.0) == []


def test_views_that_never_agreed_are_a_violation() -> None:
    found = history.converged(None, 60.0)
    assert kinds(found) == ["views-converged"]
    assert found[0].detail == "views never agreed with the stores (waited 60s)"


def test_views_that_agreed_after_the_bound_are_a_violation() -> None:
    found = history.converged(60.5, 60.0)
    assert kinds(found) == ["views-converged"]
    assert found[0].detail == "views agreed 60.5s after the last heal (bound 60s)"


# --- jobs_once ------------------------------------------------------------------------


def test_an_unacknowledged_job_is_not_judged() -> None:
    lost = job(None, acknowledged=False)
    failed = job("failed", acknowledged=False, tasks=[task(0, "succeeded", [0, 0])])
    assert history.jobs_once([lost, failed]) == []


def test_an_acknowledged_job_no_host_knows_is_lost() -> None:
    found = history.jobs_once([job(None, name="batch-7")])
    assert kinds(found) == ["job-kept"]
    assert found[0].detail == "job batch-7 was acknowledged but no host knows it"


@pytest.mark.parametrize("state", ["failed", "running", "cancelled"])
def test_an_acknowledged_job_that_did_not_succeed_is_a_violation(state: str) -> None:
    found = history.jobs_once([job(state, tasks=[task(0, "failed", [1])])])
    assert kinds(found) == ["job-succeeded"]  # its failed task is the job's violation only
    assert found[0].detail == f"job j1 ended {state}"


@pytest.mark.parametrize(("codes", "wins"), [([0, 0], 2), ([1], 0), ([], 0), ([None], 0),
                                             ([0, 1, 0], 2)])
def test_a_succeeded_task_without_exactly_one_success_is_a_violation(
        codes: list[int | None], wins: int) -> None:
    found = history.jobs_once([job(tasks=[task(0), task(1, "succeeded", codes)])])
    assert kinds(found) == ["task-once"]
    assert found[0].detail == f"task 1 of j1 recorded {wins} successes (exit codes {codes})"


@pytest.mark.parametrize("codes", [[0], [1, 0], [None, 0], [1, None, 0]])
def test_a_succeeded_task_with_one_success_after_failed_tries_passes(
        codes: list[int | None]) -> None:
    assert history.jobs_once([job(tasks=[task(0, "succeeded", codes)])]) == []


def test_a_job_that_succeeded_with_a_task_not_succeeded_is_a_violation() -> None:
    found = history.jobs_once([job(tasks=[task(0), task(1, "running", [])])])
    assert kinds(found) == ["task-once"]
    assert found[0].detail == "job j1 succeeded with task 1 running"


PAIR = history.Pair(primary="p1", standby="s1")


@pytest.mark.parametrize(("primary", "standby"), [("started", "stopped"),
                                                  ("stopped", "started"),
                                                  ("destroyed", "started"),
                                                  ("started", "created")])
def test_a_pair_with_one_copy_running_passes(primary: str, standby: str) -> None:
    assert history.one_copy([PAIR], {"p1": primary, "s1": standby}) == []


def test_a_pair_with_both_copies_running_is_a_violation() -> None:
    found = history.one_copy([PAIR], {"p1": "started", "s1": "started"})
    assert kinds(found) == ["one-copy"]
    assert found[0].detail == "primary p1 is started, its standby s1 is started: both run"


@pytest.mark.parametrize("states", [{"p1": "stopped", "s1": "stopped"}, {"s1": "created"}, {}])
def test_a_pair_with_no_copy_running_is_a_violation(states: dict[str, str]) -> None:
    found = history.one_copy([PAIR], states)
    assert kinds(found) == ["one-copy"]
    assert found[0].detail.endswith("neither runs")


def test_each_pair_is_judged_on_its_own() -> None:
    other = history.Pair(primary="p2", standby="s2")
    found = history.one_copy([PAIR, other], {"p1": "started", "s1": "stopped",
                                             "p2": "started", "s2": "started"})
    assert [v.detail.split()[1] for v in found] == ["p2"]


def test_a_failed_job_with_a_task_that_succeeded_twice_reports_both() -> None:
    found = history.jobs_once([job("failed", tasks=[task(0, "succeeded", [0, 0])])])
    assert kinds(found) == ["job-succeeded", "task-once"]


def test_each_job_is_judged_on_its_own() -> None:
    found = history.jobs_once([job(name="ok"), job(None, name="gone"),
                               job("failed", name="bad")])
    assert [(v.invariant, v.detail.split()[1]) for v in found] == [
        ("job-kept", "gone"), ("job-succeeded", "bad")]


# --- kernel_clean ---------------------------------------------------------------------

# Each field the inventory lists, and the words its violation names it by.
FIELDS = {"namespaces": "namespaces", "links": "links", "nft_tables": "nft tables",
          "mounts": "mounts", "machine_processes": "machine processes"}


def test_every_field_of_the_inventory_is_covered_here() -> None:
    assert set(FIELDS) == set(history.Inventory.model_fields)


def test_names_that_were_there_before_the_run_are_not_leftovers() -> None:
    before = inventory()
    fewer = history.Inventory(links=["lo"])  # and names the run took away are no matter
    assert history.kernel_clean(before, before) == []
    assert history.kernel_clean(before, fewer) == []


@pytest.mark.parametrize(("field", "words"), list(FIELDS.items()))
def test_a_name_new_after_the_run_is_a_leftover(field: str, words: str) -> None:
    before = inventory()
    after = before.model_copy(update={field: [*getattr(before, field), "bodega-x"]})
    found = history.kernel_clean(before, after)
    assert kinds(found) == ["kernel-clean"]
    assert found[0].detail == f"1 {words} left: ['bodega-x']"


def test_leftovers_are_counted_in_full_and_the_first_five_named() -> None:
    before = inventory()
    new = [f"veth{i}" for i in range(7, 0, -1)]
    after = before.model_copy(update={"links": [*before.links, *new],
                                      "mounts": [*before.mounts, "/run/bodega tmpfs"]})
    found = history.kernel_clean(before, after)
    assert kinds(found) == ["kernel-clean", "kernel-clean"]
    assert found[0].detail == "7 links left: ['veth1', 'veth2', 'veth3', 'veth4', 'veth5']"
    assert found[1].detail == "1 mounts left: ['/run/bodega tmpfs']"
