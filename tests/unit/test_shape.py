"""The shape of the code, checked on every run: long modules that say why, no import
circles, pure cores in folders the import contract names, fewer untyped answers, test kits
named one way.

Pure reading: the files under ``src`` and ``tests``, ``pyproject.toml``, and the import
graph ``grimp`` builds from the source (nothing is imported or run). Each failure names
every offender, so one run says all there is to fix.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = SRC / "bodega"
TESTS = ROOT / "tests"

# A review signal, not a cap: a module is one idea, whatever its length, and one that
# grows past this says at its top why it is one idea (a sentence with "long because").
REVIEW_LINES = 400
WHY_LONG = "long because"

# Untyped dicts. Answers are models (docs/broker.md, "Typed answers"); what is left sits
# where arbitrary JSON is the contract: registry row documents and the registry's wire, the
# OpenAPI document, stored JSON columns and the operation log, an event's request, the OCI
# runtime spec, the placement record, a release's bodega.toml, a raw TOML document, the
# store's column updates. The ceiling only goes down: typing one lowers the count, and the
# ceiling with it (to the new count) in the same change. It never goes up to let a new one
# in: a new boundary gets a model.
UNTYPED_DICT = re.compile(r"dict\[\s*str\s*,\s*Any\s*\]")
UNTYPED_DICT_CEILING = 1

# Pure by their imports, in a room that holds a core, and still not in it: nothing in them
# decides anything. Each says why; everything else pure there is in the core.
NOT_CORES = {
    "bodega.broker.config": "the broker's settings, a frozen dataclass",
    "bodega.broker.metrics": "metric definitions",
    "bodega.broker.openapi": "the API document, built from the request models",
    "bodega.broker.openapi_schemas": "the API document's response schemas, data only",
    "bodega.proxy.metrics": "metric definitions",
    "bodega.worker.metrics": "metric definitions",
    "bodega.registry.membership.metrics": "metric definitions",
    "bodega.registry.sealing.keyfile": "reads and writes the keyring file",
    "bodega.proxy.request_ids": "request ids: a clock and random bytes, no decision",
    "bodega.worker.host.survey": "reads the host's links and addresses from /sys and /proc",
    "bodega.worker.images.store": "the image store: blobs and unpacked bases on disk",
    "bodega.worker.images.unpack": "writes an image's layers to disk",
    "bodega.worker.host.volume_copy": "copies a volume's files on disk and digests them",
    "bodega.worker.host.snapshot_tar": "packs a snapshot's files into a tar file and back",
    "bodega.runtime.tls.files": "reads and writes keys and certificates",
    "bodega.runtime.tls.authority": "the CA at work: its files, a clock, a log",
    "bodega.runtime.tls.contexts": "SSL contexts loaded from files, and a counter",
    "bodega.runtime.tls.join_store": "reads the join book file of a bodega from before the view",
    "bodega.worker.drivers.vm.initramfs": "finds the vm kernel and builds the initramfs on disk",
    "bodega.worker.drivers.oci.guest_files": "writes a machine's files into its root on disk",
    "bodega.broker.jobs.submit_list": "a list submit's loop: each element's submit awaited "
                                      "at its home in turn",
    "bodega.cli.commands.config": "a command: flags and output around deploy.core's checks",
    "bodega.cli.commands.sim": "a command: flags and output around the simulator",
    "bodega.cli.daemons.internal_links": "reads the identity in a daemon's TLS directory",
    "bodega.cli.daemons.options": "flag declarations, data only",
    "bodega.cli.daemons.service": "writes a systemd unit file",
    "bodega.cli.session.app_choice": "reads the bodega.toml here for its app",
    "bodega.cli.session.context_store": "reads and writes the contexts file",
    "bodega.cli.session.errors": "prints an error's one line",
    "bodega.cli.session.plain_table": "writes a table to the terminal",
}

# The cores the charter names: they stay in the contract, whatever else moves.
NAMED_CORES = ("bodega.model", "bodega.placement", "bodega.sim", "bodega.worker.core",
               "bodega.deploy.core.plan", "bodega.proxy.core.balance")


def modules(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def test_a_module_past_400_lines_says_why_it_is_one_idea() -> None:
    unsaid = {path.relative_to(ROOT).as_posix(): n for path in modules(PACKAGE)
              if (n := lines(path)) > REVIEW_LINES and WHY_LONG not in docstring(path)}
    assert not unsaid, (
        f"{len(unsaid)} modules over {REVIEW_LINES} lines without a word on why: split one "
        f"along a real seam (by idea, not by size), or say in its docstring what makes it "
        f"one idea ('... is {WHY_LONG} ...'):\n"
        + "\n".join(f"  {p}: {n} lines" for p, n in sorted(unsaid.items())))


def test_a_reason_to_be_long_is_found_in_a_docstring_only(tmp_path: Path) -> None:
    said = tmp_path / "said.py"
    said.write_text(f'"""A parser: {WHY_LONG} its grammar is one table."""\nx = 1\n')
    unsaid = tmp_path / "unsaid.py"
    unsaid.write_text(f'"""A parser."""\n# {WHY_LONG} nothing\nx = 1\n')
    assert WHY_LONG in docstring(said)
    assert WHY_LONG not in docstring(unsaid)


# The broker by feature (a room per feature, docs/broker.md): a handful of modules at its top
# (the daemon, the server, their config, metrics and the API document), every other in a room.
BROKER_TOP = 12


def test_the_broker_keeps_a_handful_of_modules_at_its_top() -> None:
    top = sorted(p.name for p in (PACKAGE / "broker").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= BROKER_TOP, (
        f"{len(top)} modules at the broker's top, over {BROKER_TOP}: put each in the room of "
        f"its feature (broker/<feature>/): {', '.join(top)}")


def misplaced_job_modules(paths: Iterable[Path]) -> list[str]:
    """Batch jobs live in rooms named ``jobs``: a ``sched`` folder, or a module named for
    jobs (``job_*``, ``jobs_*``, ``sched*``) outside a ``jobs`` folder, is out of place."""
    found = []
    for path in paths:
        folders = path.parts[:-1]
        named = path.stem.startswith(("job_", "jobs_", "sched"))
        if "sched" in folders or (named and "jobs" not in folders):
            found.append(path.as_posix())
    return sorted(found)


def test_batch_jobs_live_in_rooms_named_jobs() -> None:
    misplaced = misplaced_job_modules(p.relative_to(SRC) for p in modules(PACKAGE))
    assert not misplaced, ("put batch jobs' modules in a jobs room (bodega/jobs, broker/jobs, "
                           "worker/jobs, wire/jobs): " + ", ".join(misplaced))


def test_the_jobs_rule_finds_what_it_is_for() -> None:
    assert misplaced_job_modules([
        Path("bodega/sched/spec.py"), Path("bodega/worker/ops/job_home.py"),
        Path("bodega/wire/jobs_client.py"), Path("bodega/wire/sched.py"),
        Path("bodega/worker/jobs/home.py"), Path("bodega/jobs/spec.py"),
        Path("bodega/broker/jobs/desk.py"), Path("bodega/sim/jobs.py")]) == [
        "bodega/sched/spec.py", "bodega/wire/jobs_client.py", "bodega/wire/sched.py",
        "bodega/worker/ops/job_home.py"]


def test_timed_waits_go_through_within_not_wait_for() -> None:
    """``asyncio.wait_for`` on Python 3.11 can lose a cancellation (``runtime/waits.py``)."""
    users = [path.relative_to(ROOT).as_posix() for path in modules(PACKAGE)
             if path.name != "waits.py" and "wait_for(" in path.read_text()]
    assert not users, "use bodega.runtime.waits.within instead in: " + ", ".join(users)


# -- import circles ----------------------------------------------------------------------------
def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def a_circle(graph: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """One circle through the component's first module, shortest first, to show the way."""
    first, members = component[0], set(component)
    paths = {n: [first, n] for n in graph[first] if n in members}
    frontier = sorted(paths)
    while first not in paths:
        nxt = []
        for node in frontier:
            for n in sorted(graph[node]):
                if n in members and n not in paths:
                    paths[n] = [*paths[node], n]
                    nxt.append(n)
        frontier = nxt
    return paths[first]


def test_the_circle_finder_finds_circles_and_only_them() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"},
             "g": {"g2"}, "g2": set()}
    assert strongly_connected(graph) == [["a", "b", "c"], ["e", "f"]]
    assert a_circle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_circle_among_bodega_modules() -> None:
    """Imports only for type checking count, and so do imports inside functions.

    The pure-core contract leaves type-only imports out because they never run; a circle
    is about structure, not about what runs: two modules that name each other cannot be
    read, tested or moved apart, whether or not one of the imports sits under
    ``TYPE_CHECKING``. A capability that imports its driver for the driver's type and is
    handed ``self`` is the circle this check exists for; and a type-only import becomes a
    real one the day the name is needed at run time.
    """
    built = grimp.build_graph("bodega", exclude_type_checking_imports=False, cache_dir=None)
    graph = {m: built.find_modules_directly_imported_by(m) for m in built.modules}
    circles = strongly_connected(graph)
    assert not circles, f"{len(circles)} import circles:\n" + "\n".join(
        f"  {', '.join(c)}\n    e.g. {' -> '.join(a_circle(graph, c))}" for c in circles)


# -- pure cores and the import contract ---------------------------------------------------------
def import_linter() -> dict[str, Any]:
    settings: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(settings["tool"]["importlinter"])


def purity_contract() -> dict[str, Any]:
    contracts = [c for c in import_linter()["contracts"] if c["type"] == "forbidden"
                 and c["source_modules"] and "asyncio" in c["forbidden_modules"]]
    assert len(contracts) == 1, "expected one contract forbidding I/O to the pure cores"
    return dict(contracts[0])


def covered(module: str, sources: Iterable[str]) -> bool:
    """A contract names a module itself, or its package (which covers all below it)."""
    return any(module == s or module.startswith(s + ".") for s in sources)


def packages() -> set[str]:
    """Every bodega package, dotted: the folders with an ``__init__.py``."""
    return {init.parent.relative_to(SRC).as_posix().replace("/", ".")
            for init in PACKAGE.rglob("__init__.py")}


def pure_modules(contract: Mapping[str, Any]) -> set[str]:
    """The bodega modules from which no chain of imports reaches an I/O library.

    The graph is built as import-linter builds it for the contract (type-only imports
    left out if the settings say so), minus the imports the contract ignores.
    """
    forbidden = set(contract["forbidden_modules"])
    built = grimp.build_graph(
        "bodega", include_external_packages=True, cache_dir=None,
        exclude_type_checking_imports=bool(import_linter().get("exclude_type_checking_imports")))
    for ignored in contract.get("ignore_imports", []):
        assert "*" not in ignored, f"wildcards are not read here: {ignored}"
        importer, imported = (part.strip() for part in ignored.split("->"))
        built.remove_import(importer=importer, imported=imported)
    return {m for m in built.modules if m.startswith("bodega")
            and not {r.split(".")[0] for r in built.find_upstream_modules(m)} & forbidden}


# A core is a folder: a package named ``core`` inside the room whose decisions it holds
# (``proxy/core``, ``worker/images/core``), or a package pure as a whole (``placement``).
CORE = "core"


def is_core_folder(package: str) -> bool:
    return package.rpartition(".")[2] == CORE


def core_homes(sources: Iterable[str], known: set[str]) -> set[str]:
    """The rooms that hold a core: the package around each ``core`` folder the contract
    names, and around each module it names one by one.

    (A package named whole and not a ``core`` folder, such as ``bodega.placement``, is pure
    whole: import-linter checks all of it, and the room around it is none of its business.)
    """
    return {s.rpartition(".")[0] for s in sources if s not in known or is_core_folder(s)}


def unnamed_pure(pure: Iterable[str], sources: Iterable[str], known: set[str],
                 not_cores: Mapping[str, str]) -> list[str]:
    """Pure modules in a room that holds a core, outside it and not said to be no core."""
    sources = list(sources)
    homes = core_homes(sources, known)
    return sorted(m for m in pure if m.rpartition(".")[0] in homes and m not in known
                  and not covered(m, sources) and m not in not_cores)


def unnamed_core_folders(known: set[str], sources: Iterable[str]) -> list[str]:
    """``core`` folders the contract does not cover: a folder named so is pure by name."""
    sources = list(sources)
    return sorted(p for p in known if is_core_folder(p) and not covered(p, sources))


def modules_named_one_by_one(sources: Iterable[str], known: set[str]) -> list[str]:
    """What the contract names that is a module, not a folder (outside ``BY_MODULE``)."""
    return sorted(s for s in sources if s not in known
                  and not any(s.startswith(p + ".") for p in BY_MODULE))


# Packages whose pure modules the contract may name one by one (none: every room that
# decides something holds a core folder).
BY_MODULE: tuple[str, ...] = ()


def test_every_core_folder_is_named_by_the_contract() -> None:
    """A module put in a ``core`` folder is pure by where it sits: import-linter refuses
    the first I/O import that reaches it, directly or through what it imports."""
    unnamed = unnamed_core_folders(packages(), purity_contract()["source_modules"])
    assert not unnamed, ("core folders the pure-core contract does not name: add each to "
                         "its source_modules in pyproject.toml: " + ", ".join(unnamed))


def test_the_contract_names_folders() -> None:
    one_by_one = modules_named_one_by_one(purity_contract()["source_modules"], packages())
    assert not one_by_one, (
        "the pure-core contract names modules, not folders: move each into the core folder "
        "of its room (or make its room's core folder) and name the folder: "
        + ", ".join(one_by_one))


def test_a_pure_module_beside_a_core_is_in_it() -> None:
    """A new pure module beside a core cannot stay out of it unnoticed.

    Pure: no import reaches, directly or through other bodega modules, a library the
    contract forbids. In a room that holds a core (the package around a ``core`` folder),
    every pure module is in the core, or listed in ``NOT_CORES`` with its reason;
    subpackages answer for themselves. In the core, a module stays pure: import-linter
    refuses the first I/O import that reaches it.
    """
    contract = purity_contract()
    unnamed = unnamed_pure(pure_modules(contract), contract["source_modules"], packages(),
                           NOT_CORES)
    assert not unnamed, (
        "pure modules beside a core, outside it: move each into the core folder of its "
        "room (or, if it decides nothing, add it to NOT_CORES here with why):\n"
        + "\n".join(f"  {m}" for m in unnamed))


def test_the_core_rules_find_what_they_are_for() -> None:
    known = {"bodega.proxy", "bodega.proxy.core", "bodega.proxy.haproxy", "bodega.deploy",
             "bodega.deploy.core", "bodega.placement", "bodega.registry",
             "bodega.registry.membership", "bodega.cluster"}
    sources = ["bodega.placement", "bodega.proxy.core", "bodega.registry.membership.core.swim",
               "bodega.cluster.config"]
    pure = {"bodega.proxy.core.balance", "bodega.proxy.new_rule", "bodega.proxy.metrics",
            "bodega.proxy.haproxy.core.layout", "bodega.placement.rank", "bodega.cluster.config",
            "bodega.cluster.service_unit", "bodega.registry.membership.core.table",
            "bodega.registry.membership.core.swim", "bodega.deploy.core.plan", "bodega.proxy",
            "bodega.worker.metrics"}
    assert unnamed_pure(pure, sources, known, {"bodega.proxy.metrics": "metrics"}) == [
        "bodega.cluster.service_unit", "bodega.proxy.new_rule",
        "bodega.registry.membership.core.table"]
    assert unnamed_core_folders(known, sources) == ["bodega.deploy.core"]
    assert modules_named_one_by_one(sources, known) == [
        "bodega.cluster.config", "bodega.registry.membership.core.swim"]


def test_the_cores_the_charter_names_stay_in_the_contract() -> None:
    sources = purity_contract()["source_modules"]
    dropped = [m for m in NAMED_CORES if not covered(m, sources)]
    assert not dropped, f"the pure-core contract no longer names {dropped}"


def test_what_is_not_a_core_is_pure_and_not_named() -> None:
    contract = purity_contract()
    pure = pure_modules(contract)
    stale = {m: why for m, why in NOT_CORES.items()
             if m not in pure or covered(m, contract["source_modules"])}
    assert not stale, f"NOT_CORES lists modules gone, impure or named by the contract: {stale}"


# -- untyped answers -----------------------------------------------------------------------------
def test_untyped_dicts_stay_under_their_ceiling() -> None:
    counts = {path.relative_to(ROOT).as_posix(): len(UNTYPED_DICT.findall(path.read_text()))
              for path in modules(SRC)}
    total = sum(counts.values())
    most = sorted(((n, p) for p, n in counts.items() if n), reverse=True)[:10]
    assert total <= UNTYPED_DICT_CEILING, (
        f"{total} dict[str, Any] in src, over the ceiling of {UNTYPED_DICT_CEILING}: give the "
        "new boundary a typed model. Most are in:\n"
        + "\n".join(f"  {p}: {n}" for n, p in most))


# -- the tests' own kits -------------------------------------------------------------------------
def helper_modules() -> list[Path]:
    """Modules under tests that are not tests: kits, scenarios, and programs' parts.

    A package with a ``__main__`` is a program (``python -m tests.cluster.chaos``); its
    modules are named by their part in it.
    """
    programs = {p.parent for p in TESTS.rglob("__main__.py")}
    return [p for p in modules(TESTS)
            if not p.name.startswith("test_")
            and p.name not in ("conftest.py", "__init__.py", "__main__.py")
            and not any(program in p.parents for program in programs)]


def test_every_test_helper_is_a_kit_or_a_scenario() -> None:
    """``<what>_kit.py`` builds and drives (clusters, daemons, clients, fixtures);
    ``<what>_scenario.py`` is a test body that test modules run on a cluster they share."""
    misnamed = [p.relative_to(ROOT).as_posix() for p in helper_modules()
                if not p.stem.endswith(("_kit", "_scenario"))]
    assert not misnamed, f"test helpers not named <what>_kit.py or <what>_scenario.py: {misnamed}"
