"""The contexts file: what it holds, what it refuses, and what `bodega up` does to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.cli.session.core.contexts import (
    ContextError,
    Contexts,
    make_context,
    name_for,
    parse,
    register_cluster,
    render,
)

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,20}", fullmatch=True)
texts = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=30)


@given(st.dictionaries(names, st.tuples(st.booleans(), texts, st.none() | texts), max_size=4),
       st.data())
def test_what_is_written_reads_back_the_same(specs: dict[str, tuple[bool, str, str | None]],
                                             data: st.DataObject) -> None:
    entries = tuple(sorted(
        (make_context(name, f"http://host-{i}:4280", token=secret if inline else None,
                      token_file=None if inline else secret, registry=registry)
         for i, (name, (inline, secret, registry)) in enumerate(specs.items())),
        key=lambda c: c.name))
    current = data.draw(st.sampled_from([None, *specs]))
    contexts = Contexts(current=current, entries=entries)
    assert parse(render(contexts), "f") == contexts


@pytest.mark.parametrize(("text", "error"), [
    ("current-context = 1", "f: current-context must be a string"),
    ("[contexts.a]\napi_url = 'http://x'\ntoken = 't'\nport = '1'",
     "f: contexts.a: unknown key 'port'"),
    ("[contexts.a]\ntoken = 't'", "f: contexts.a has no api_url"),
    ("[contexts.a]\napi_url = 'ftp://x'\ntoken = 't'", "f: context 'a': api_url must be an http"),
    ("[contexts.a]\napi_url = 'http://x'", "f: context 'a': give its token either inline"),
    ("current-context = 'b'\n[contexts.a]\napi_url = 'http://x'\ntoken = 't'",
     "f: current-context 'b' names no context"),
    ("[contexts", "f: not TOML"),
    ("colour = 'red'", "f: unknown key 'colour'"),
])
def test_a_bad_file_is_one_line_naming_it(text: str, error: str) -> None:
    with pytest.raises(ContextError) as caught:
        parse(text, "f")
    assert str(caught.value).startswith(error)


def test_names_come_from_the_data_dir() -> None:
    assert name_for(Path("/src/app/.bodega")) == "local"
    assert name_for(Path("/src/app/.bodega2")) == "bodega2"
    assert name_for(Path("/tmp/x/staging cluster")) == "staging-cluster"


def test_the_first_cluster_up_becomes_current_and_a_second_does_not() -> None:
    first = register_cluster(Contexts(), Path("/w/.bodega"), "http://127.0.0.1:4280/",
                             Path("/w/.bodega/api-token"))
    assert (first.context.name, first.current) == ("local", True)
    assert first.context.api_url == "http://127.0.0.1:4280"
    second = register_cluster(first.contexts, Path("/w/.bodega2"), "http://127.0.0.1:4281",
                              Path("/w/.bodega2/api-token"))
    assert (second.context.name, second.current) == ("bodega2", False)
    assert second.contexts.current == "local"
    # The same data dir again, on another port: its context is updated, not added.
    again = register_cluster(second.contexts, Path("/w/.bodega2"), "http://127.0.0.1:4390",
                             Path("/w/.bodega2/api-token"))
    assert [c.name for c in again.contexts.entries] == ["bodega2", "local"]
    assert again.contexts.named("bodega2").api_url == "http://127.0.0.1:4390"
    # Another data dir of the same name elsewhere gets a name of its own.
    other = register_cluster(again.contexts, Path("/v/.bodega"), "http://127.0.0.1:4480",
                             Path("/v/.bodega/api-token"))
    assert other.context.name == "local-2"
    assert again.contexts.named("local").data_dir == "/w/.bodega"


def test_removing_the_current_context_leaves_none_current() -> None:
    contexts = Contexts(current="a", entries=(make_context("a", "http://x", token="t"),))
    assert contexts.remove("a") == Contexts()
    with pytest.raises(ContextError, match="no context 'b'"):
        contexts.use("b")
