"""A submit in the article's shape and in the richer one, read into one job spec."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bodega.jobs.spec import JOB_KEY, task_config
from bodega.wire.public.jobs.api import SubmitBody


def test_the_articles_shape_splits_its_command_as_a_shell_would() -> None:
    body = SubmitBody.model_validate({"Name": "frick", "Command": "sleep 1", "Restart": True})
    spec = body.spec("app", 1000.0)
    assert (spec.name, spec.pool, spec.command) == ("frick", "bodega", ("sleep", "1"))
    assert spec.config.init is not None
    assert spec.config.init.exec == ["sleep", "1"]
    assert spec.max_attempts == 0  # Restart: retried until it works (or its deadline)
    frack = SubmitBody.model_validate({"Name": "frack", "Command": "sleep 5"}).spec("a", 0.0)
    assert frack.max_attempts == 3
    once = SubmitBody.model_validate({"Name": "x", "Command": "true", "Restart": False})
    assert once.spec("a", 0.0).max_attempts == 1


def test_a_command_is_never_given_to_a_shell() -> None:
    spec = SubmitBody.model_validate(
        {"Name": "q", "Command": "echo 'a b' $HOME; rm -rf /"}).spec("a", 0.0)
    assert spec.command == ("echo", "a b", "$HOME;", "rm", "-rf", "/")


def test_an_unbalanced_quote_is_a_clear_error() -> None:
    body = SubmitBody.model_validate({"Name": "q", "Command": "echo 'oops"})
    with pytest.raises(ValueError, match="No closing quotation"):
        body.spec("a", 0.0)


def test_the_richer_shape_takes_a_config_count_resources_and_rules() -> None:
    body = SubmitBody.model_validate({
        "name": "render", "pool": "gpu", "count": 12, "cpus": 2, "memory_mb": 1024,
        "config": {"image": "process", "init": {"exec": ["render", "--all"]},
                   "env": {"A": "1"}},
        "env": {"B": "2"}, "max_attempts": 5, "deadline": 600, "idempotency_key": "k1",
        "lease_seconds": 10, "backoff": 0.5})
    spec = body.spec("app", 1000.0)
    assert (spec.pool, spec.count, spec.max_attempts, spec.deadline_at) == ("gpu", 12, 5, 1600.0)
    assert spec.command == ("render", "--all")
    assert spec.config.env == {"A": "1", "B": "2"}
    assert spec.ask().cpus == 2
    assert spec.ask().memory_mb == 1024
    assert (spec.lease_seconds, spec.backoff) == (10.0, 0.5)


def test_a_deadline_may_be_an_rfc3339_time() -> None:
    spec = SubmitBody.model_validate({"Name": "d", "Command": "true",
                                      "deadline": "2030-01-01T00:00:00Z"}).spec("a", 0.0)
    assert spec.deadline_at == 1893456000.0
    with pytest.raises(ValueError, match="time zone"):
        SubmitBody.model_validate({"Name": "d", "Command": "true",
                                   "deadline": "2030-01-01T00:00:00"}).spec("a", 0.0)


def test_unknown_fields_bad_names_and_no_command_are_refused() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        SubmitBody.model_validate({"Name": "x", "Command": "true", "Priority": 3})
    with pytest.raises(ValueError, match="job name"):
        SubmitBody.model_validate({"Name": "no spaces", "Command": "true"}).spec("a", 0.0)
    with pytest.raises(ValueError, match="needs a command"):
        SubmitBody.model_validate({"Name": "x"}).spec("a", 0.0)
    with pytest.raises(ValueError, match="pool"):
        SubmitBody.model_validate({"Name": "x", "Command": "t", "Pool": "Bad Pool"}).spec("a", 0)


def test_an_idempotency_key_names_the_job_when_no_name_is_given() -> None:
    one = SubmitBody.model_validate({"Command": "true", "idempotency_key": "k"})
    assert one.job_name() == one.job_name()
    assert one.job_name().startswith("job-")


def test_each_task_runs_as_a_machine_destroyed_at_its_end_and_never_restarted() -> None:
    spec = SubmitBody.model_validate({"Name": "frick", "Command": "sleep 1",
                                      "Restart": True}).spec("app", 0.0)
    config = task_config(spec, "01JOB", 3, 2)
    assert config.auto_destroy is True
    assert config.restart is not None
    assert config.restart.policy == "no"
    assert config.metadata is not None
    assert config.metadata[JOB_KEY] == "01JOB"
    assert spec.config.auto_destroy is None  # the job's own config is left as it was


def test_a_task_is_told_its_index_its_attempt_and_its_job_in_its_environment() -> None:
    spec = SubmitBody.model_validate({"name": "frames", "command": "render", "count": 8,
                                      "env": {"SCENE": "3"}}).spec("app", 0.0)
    env = task_config(spec, "01JOB", 5, 2).env or {}
    assert env == {"SCENE": "3", "BODEGA_JOB": "01JOB", "BODEGA_JOB_NAME": "frames",
                   "BODEGA_TASK": "5", "BODEGA_TASK_COUNT": "8", "BODEGA_ATTEMPT": "2"}


def test_a_job_names_the_jobs_it_runs_after_once_each_never_itself() -> None:
    spec = SubmitBody.model_validate({"name": "load", "command": "true",
                                      "after": ["extract", "clean", "extract"]}).spec("a", 0.0)
    assert spec.after == ("extract", "clean")
    with pytest.raises(ValueError, match="cannot run after itself"):
        SubmitBody.model_validate({"name": "x", "command": "true", "after": ["x"]}).spec("a", 0)
    with pytest.raises(ValueError, match="job name 'no way'"):
        SubmitBody.model_validate({"name": "x", "command": "true",
                                   "after": ["no way"]}).spec("a", 0)


def test_a_periodic_jobs_deadline_is_per_run_and_its_name_leaves_room_for_the_fire() -> None:
    spec = SubmitBody.model_validate({
        "name": "nightly", "command": "true", "deadline": 900,
        "periodic": {"cron": "0 3 * * *", "time_zone": "Europe/Paris"}}).spec("a", 100.0)
    assert spec.periodic is not None
    assert (spec.periodic.run_seconds, spec.deadline_at) == (900, None)
    wrong: list[tuple[dict[str, object], str]] = [
        ({"deadline": "2030-01-01T00:00:00Z"}, "seconds from each run's launch"),
        ({"after": ["other"]}, "cannot wait for other jobs"),
        ({"name": "n" * 90}, "at most 85 characters"),
    ]
    for body, words in wrong:
        with pytest.raises(ValueError, match=words):
            SubmitBody.model_validate({"name": "p", "command": "true",
                                       "periodic": {"cron": "@daily"}, **body}).spec("a", 0.0)
