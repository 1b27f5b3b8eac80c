"""Warm slots' rules: which tasks may share a slot, how many runs one holds, the slot's
config, the lines it reads."""

from __future__ import annotations

from bodega.jobs.slots import (
    AHEAD,
    LOOP,
    MAX_DEPTH,
    RUNNER,
    SHORT,
    SLOT_KEY,
    depth,
    dispatch_line,
    eligible,
    loop_of,
    results,
    slot_config,
    slot_key,
    take_now,
    task_line,
)
from bodega.model.machine_config import Guest, Init, MachineConfig


def task(argv: list[str], env: dict[str, str] | None = None, cpus: int = 1,
         image: str = "process") -> MachineConfig:
    return MachineConfig(image=image, init=Init(exec=argv), env=env,
                         guest=Guest(cpus=cpus, memory_mb=256),
                         metadata={"bodega_job": "j1", "bodega_task": "0"})


def test_tasks_of_one_shape_share_a_slot_whatever_their_command_env_and_job() -> None:
    one = task(["echo", "a"], {"BODEGA_TASK": "0", "X": "1"})
    other = task(["sleep", "1"], {"BODEGA_TASK": "7"})
    assert slot_key("app", one) == slot_key("app", other)
    assert slot_key("app", one) != slot_key("other-app", one)
    assert slot_key("app", one) != slot_key("app", task(["echo", "a"], cpus=2))


def test_a_slot_runs_the_runner_with_none_of_a_task_s_env_or_metadata() -> None:
    config = slot_config("app", task(["echo", "a"], {"SECRETISH": "v"}))
    assert config.env is None
    assert config.metadata == {SLOT_KEY: slot_key("app", task(["x"]))}
    assert config.command() == ["/bin/sh", "-c", RUNNER, "bodega-slot"]
    assert config.guest is not None
    assert config.guest.cpus == 1


def test_a_slot_of_an_earlier_loop_is_told_apart_and_given_lines_in_its_form() -> None:
    assert loop_of(slot_config("app", task(["echo", "a"]))) == LOOP
    earlier = slot_config("app", task(["echo", "a"]))
    assert earlier.init is not None
    earlier.init.exec = ["/bin/sh", "-c", "while IFS= read -r line <&3; do :; done", "x"]
    assert loop_of(earlier) == 1
    earlier.init.exec = ["/bin/sh", "-c", "e() { child=$!; }\n. ./tasks", "bodega-slot"]
    assert loop_of(earlier) == 2
    one = task(["echo", "a b"], {"X": "it's"})
    assert task_line(1, 7, one) == b"7 X='it'\"'\"'s' exec echo 'a b'\n"
    assert task_line(2, 7, one) == (b"if s 7; then X='it'\"'\"'s' exec echo 'a b' 3<&- "
                                    b"</dev/null >out/7.log 2>&1 & e; fi\n")
    assert task_line(LOOP, 7, one) == dispatch_line(7, one)


def test_a_task_runs_in_the_foreground_its_program_s_name_quoted_and_a_shell_word_execd(
        ) -> None:
    """The program's name is always a quoted word (``if`` no reserved word, ``A=1`` no
    assignment); one named as a shell's own command is exec'd by a subshell."""
    assert dispatch_line(7, task(["bash", "-c", "a b"], {"X": "1"})) == \
        b"if s 7; then X=1 'bash' -c 'a b' 3<&- </dev/null >out/7.log 2>&1; e $?; fi\n"
    assert dispatch_line(7, task(["A=1", "if"])) == \
        b"if s 7; then 'A=1' if 3<&- </dev/null >out/7.log 2>&1; e $?; fi\n"
    assert dispatch_line(7, task(["echo", "a"], {"X": "1"})) == \
        b"if s 7; then (X=1 exec echo a) 3<&- </dev/null >out/7.log 2>&1; e $?; fi\n"
    assert dispatch_line(7, task(["/bin/echo", "a"])).startswith(b"if s 7; then '/bin/echo' a ")


def test_only_host_programs_on_one_line_are_eligible() -> None:
    assert eligible(task(["echo", "a"], {"A_1": "x y"}))
    assert not eligible(task(["echo", "a"], image="busybox:latest"))
    assert not eligible(task(["echo", "a\nb"]))
    assert not eligible(task(["echo"], {"A": "x\ny"}))
    assert not eligible(task(["echo"], {"A-B": "x"}))  # not a shell variable's name


def test_results_are_read_whole_lines_only() -> None:
    assert results("3 0\n4 143\n5 1") == [(3, 0), (4, 143)]
    assert results("") == []
    # A line a full disk tore, ended by the retry's leading newline, is skipped.
    assert results("3 0\n5 \n5 1\n") == [(3, 0), (5, 1)]


def test_a_task_whose_line_may_not_be_written_whole_is_not_eligible() -> None:
    # A FIFO write over PIPE_BUF may land in part: the slot would wait for the rest.
    assert eligible(task(["echo", "x" * 3000]))
    assert not eligible(task(["echo", *(f"file-{n}.txt" for n in range(400))]))


def test_a_job_not_known_short_gets_no_task_written_ahead() -> None:
    assert depth(None) == 1  # none ran yet here
    assert depth(SHORT) == depth(30.0) == 1  # a long task must not hold back the next


def test_a_short_job_gets_a_tenth_of_a_second_of_work_written_ahead_within_bounds() -> None:
    assert depth(SHORT * 0.8) == 2  # the next one, however long: one round trip saved
    assert depth(AHEAD) == 2
    assert depth(AHEAD / 3) == 4  # running, and three more: a tenth of a second
    assert depth(0.002) == depth(0.0) == MAX_DEPTH  # tiny tasks: bound to few all the same
    took = [0.0, 0.001, 0.01, 0.03, 0.1, 0.3, SHORT - 0.001]
    assert [depth(t) for t in took] == sorted((depth(t) for t in took), reverse=True)


def test_a_take_goes_at_once_when_a_slot_would_run_dry_or_nothing_is_written_ahead() -> None:
    assert take_now(1, [3, 1, 5, 5], MAX_DEPTH)  # one slot has only its running task left
    assert take_now(1, [0, 8, 8, 8], MAX_DEPTH)  # an idle slot of the job's shape
    assert take_now(1, [1, 1], 1)  # a job not known short: one task a slot, taken as freed
    assert take_now(1, [], MAX_DEPTH)  # no slot yet: the first take makes them
    assert not take_now(0, [0, 0], MAX_DEPTH)  # no room: nothing to ask for


def test_fed_slots_take_only_once_half_their_places_are_free() -> None:
    fill = [4, 5, 6, 6]  # 4 slots of 8: 11 places free, every slot still fed
    assert not take_now(11, fill, MAX_DEPTH)
    assert not take_now(15, [4, 4, 4, 5], MAX_DEPTH)
    assert take_now(16, [4, 4, 4, 4], MAX_DEPTH)  # half of the 32 places: worth a call
