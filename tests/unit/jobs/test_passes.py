"""A jobs pass: good for its app until its expiry, and only if this cluster's key made it."""

from __future__ import annotations

from bodega.jobs.passes import PREFIX, JobPass, JobPasses
from bodega.runtime.identity_keys import identity_keys

PASSES = JobPasses(identity_keys(b"cluster-key").job_pass)


def test_a_pass_is_good_for_its_app_until_it_expires() -> None:
    raw = PASSES.mint("render", now=1000.0, ttl=600)
    assert raw.startswith(PREFIX)
    assert PASSES.check(raw, now=1599.0) == JobPass("render", 1600)
    assert PASSES.check(raw, now=1600.0) is None


def test_a_pass_of_another_key_or_altered_is_refused() -> None:
    other = JobPasses(identity_keys(b"another-cluster").job_pass)
    raw = PASSES.mint("render", now=1000.0)
    assert other.check(raw, now=1000.0) is None
    app, expiry, tag = raw[len(PREFIX):].split(".")
    assert PASSES.check(f"{PREFIX}billing.{expiry}.{tag}", now=1000.0) is None
    assert PASSES.check(f"{PREFIX}{app}.{int(expiry) + 3600}.{tag}", now=1000.0) is None


def test_what_is_not_a_pass_is_refused() -> None:
    for raw in ("", "bdg_admin", PREFIX, f"{PREFIX}a.b", f"{PREFIX}a.notdigits.tag",
                f"{PREFIX}a..tag", f"{PREFIX}a.1.2.3"):
        assert PASSES.check(raw, now=0.0) is None


def test_the_pass_key_is_not_the_machine_token_key() -> None:
    keys = identity_keys(b"cluster-key")
    assert keys.job_pass != keys.machine_token


def test_a_pass_checked_again_gets_the_same_answer_until_it_expires() -> None:
    passes = JobPasses(identity_keys(b"cluster-key").job_pass)
    raw = passes.mint("render", now=1000.0, ttl=600)
    app, expiry, tag = raw[len(PREFIX):].split(".")
    for _ in range(3):  # found good once, then only its expiry is looked at
        assert passes.check(raw, now=1100.0) == JobPass("render", 1600)
        assert passes.check(f"{PREFIX}{app}.{expiry}.{tag[::-1]}", now=1100.0) is None
    assert passes.check(raw, now=1600.0) is None
    expired = passes.mint("render", now=0.0, ttl=60)
    assert passes.check(expired, now=1000.0) is None  # good tag, past its expiry
    assert passes.check(expired, now=1000.0) is None
