"""Warm slots' rules: which tasks may share a slot, the slot's config, the lines it reads."""

from __future__ import annotations

from bodega.jobs.slots import RUNNER, SLOT_KEY, eligible, results, slot_config, slot_key
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
