"""Which cluster a command talks to, and with which token: the precedence, and the one-line
answers when there is no token for an API URL or a token is refused."""

from __future__ import annotations

import pytest

from bodega.cli.session.core.contexts import ContextError, Contexts, make_context
from bodega.cli.session.core.target import Given, HereCluster, Holder, refused_line, resolve

A, B = "http://127.0.0.1:4280", "http://127.0.0.1:4281"
LOCAL = make_context("local", A, token_file="/w/.bodega/api-token", data_dir="/w/.bodega")
SECOND = make_context("bodega2", B, token_file="/w/.bodega2/api-token", data_dir="/w/.bodega2")
BOTH = Contexts(current="local", entries=(SECOND, LOCAL))
HERE = HereCluster(".bodega", A, ".bodega/api-token")


def test_the_current_context_when_nothing_is_said() -> None:
    chosen = resolve(Given(), BOTH, HERE)
    assert (chosen.api_url, chosen.token_file) == (A, "/w/.bodega/api-token")
    assert chosen.via == "the current context 'local'"
    assert chosen.origin == "context 'local' (/w/.bodega/api-token)"


def test_context_beats_the_current_one_and_flags_beat_the_context() -> None:
    chosen = resolve(Given(context="bodega2"), BOTH, HERE)
    assert (chosen.api_url, chosen.token_file, chosen.via) == (
        B, "/w/.bodega2/api-token", "--context bodega2")
    # An explicit token is sent as given, to the context's API.
    chosen = resolve(Given(context="bodega2", token="t", token_from="BODEGA_API_TOKEN"), BOTH,
                     HERE)
    assert (chosen.api_url, chosen.token, chosen.origin) == (B, "t", "BODEGA_API_TOKEN")
    # An explicit API URL and token: both as given.
    chosen = resolve(Given(api_url="http://elsewhere:1/", token="t", context="bodega2"), BOTH,
                     HERE)
    assert (chosen.api_url, chosen.token, chosen.context) == ("http://elsewhere:1", "t", None)


def test_without_contexts_the_data_dir_here_then_nothing() -> None:
    chosen = resolve(Given(), Contexts(), HERE)
    assert (chosen.api_url, chosen.token_file, chosen.via) == (
        A, ".bodega/api-token", "the cluster in .bodega")
    with pytest.raises(ContextError) as caught:
        resolve(Given(), Contexts(), None)
    assert str(caught.value).startswith(
        "no cluster to talk to: no current context, and no cluster in .bodega here")
    # With a token and nothing else: the default API URL.
    assert resolve(Given(token="t"), Contexts(), None).api_url == A


def test_a_named_context_that_does_not_exist_is_refused_by_name() -> None:
    with pytest.raises(ContextError, match=r"no context 'nope' \(known: bodega2, local; "):
        resolve(Given(context="nope"), BOTH, HERE)


def test_an_api_url_takes_only_the_token_kept_for_it() -> None:
    # The context for that URL, whichever is current.
    chosen = resolve(Given(api_url=B + "/"), BOTH, HERE)
    assert (chosen.api_url, chosen.token_file) == (B, "/w/.bodega2/api-token")
    assert chosen.via == "--api-url (context 'bodega2')"
    # No context for it: the data dir's token only if its cluster.json names that URL.
    chosen = resolve(Given(api_url=A), Contexts(), HERE)
    assert chosen.token_file == ".bodega/api-token"
    with pytest.raises(ContextError) as caught:
        resolve(Given(api_url=B, api_url_from="BODEGA_API_URL"), Contexts(), HERE)
    assert str(caught.value) == (
        f"no token for {B}: no context is for that API URL; the cluster in .bodega is at {A} "
        f"(tokens are only sent where they belong); pass --token, or keep one: `bodega "
        f"context add NAME --api-url {B} --token-file FILE`")
    # The current context's token never goes to another URL.
    with pytest.raises(ContextError) as caught:
        resolve(Given(api_url="http://127.0.0.1:4999"), BOTH, HERE)
    assert str(caught.value).startswith("no token for http://127.0.0.1:4999: ")


def test_a_refused_stored_token_says_whose_it_is_and_where_the_right_one_is() -> None:
    chosen = resolve(Given(api_url=B), Contexts(current="local", entries=(
        make_context("local", B, token_file=".bodega/api-token"),)), None)
    holders = [Holder("context 'local'", A, "token-a", "--context local"),
               Holder("context 'bodega2'", B, "token-b", "--context bodega2")]
    assert refused_line(chosen, "token-a", holders) == (
        f"unauthorized at {B}: the token from context 'local' (.bodega/api-token) belongs to "
        f"{A}; use --context bodega2 or --token")


def test_a_refused_token_from_the_environment_says_to_unset_it() -> None:
    chosen = resolve(Given(api_url=B, token="token-a", token_from="BODEGA_API_TOKEN"), BOTH,
                     None)
    holders = [Holder("context 'local'", A, "token-a", "--context local"),
               Holder("context 'bodega2'", B, "token-b", "--context bodega2")]
    assert refused_line(chosen, "token-a", holders) == (
        f"unauthorized at {B}: the token from BODEGA_API_TOKEN belongs to {A} (context "
        "'local'); unset BODEGA_API_TOKEN and use --context bodega2")


def test_a_token_refused_where_it_was_kept_says_the_cluster_changed() -> None:
    chosen = resolve(Given(), BOTH, None)
    line = refused_line(chosen, "old", [Holder("context 'local'", A, "old", "--context local")])
    assert line == (f"unauthorized at {A}: the token from context 'local' "
                    "(/w/.bodega/api-token) was refused (was that cluster started again with "
                    "another token, or is another cluster on that port?); use --token")
