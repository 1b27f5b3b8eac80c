"""The headline benches, each at a size of a few minutes, and one table of what they print.

Each bench runs as its own command (``python -m bench.<family>.<bench>``, a real ``bodega
up`` of its own, as when run alone), its output shown as it comes; the table's figures are
read from that output, each beside the peer the bench measures in the same run:

- create+start of a process machine until its program runs, against a bare spawn
  (``bench.machines.start``);
- creates per second with 20 workers against 4 (``bench.placement.creates``, run twice);
- plain HTTP through the proxy against nginx (``bench.proxy.http``);
- batch jobs' makespan and dispatch against a Redis ``BLMOVE`` pool (``bench.jobs.queues``);
- ``bodega apps list`` against a bare interpreter's start (``bench.cli.startup``);
- the private network's overlay against the plain link, its resolver against dnsmasq
  (``bench.network.private``).

The ratio is always bodega's figure over the peer's. Figures come from a shared host's
minute: run it on a quiet machine, and read the ratios rather than the rates.

    python -m bench.headline [--only machines,proxy,...] [--save DIR]
    python -m bench.headline --from DIR     # the table again, from the outputs saved in DIR
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Row:
    """One figure of the table: bodega's and its peer's, as a bench printed them."""

    figure: str
    bodega: float | None
    peer_name: str
    peer: float | None
    unit: str

    @property
    def ratio(self) -> float | None:
        if self.bodega is None or self.peer is None or self.peer == 0:
            return None
        return self.bodega / self.peer


# A headline's outputs, by the name of its run.
Outputs = Mapping[str, str]


@dataclass(frozen=True)
class Headline:
    """A bench's runs (name -> the arguments after ``python -m``) and how its rows are read."""

    name: str
    runs: Mapping[str, tuple[str, ...]]
    rows: Callable[[Outputs], list[Row]]


def number(pattern: str, text: str, group: int = 1) -> float | None:
    """The figure a line of ``text`` gives, ``None`` when no line has it."""
    found = re.search(pattern, text, re.MULTILINE)
    return None if found is None else float(found.group(group).replace(",", ""))


def machine_start(out: Outputs) -> list[Row]:
    text = out.get("start", "")
    return [Row("create+start until the program runs", number(
        r"^\s+bodega up, public API\s+([\d.]+) ms", text), "bare spawn",
        number(r"^\s+bare asyncio spawn\s+([\d.]+) ms", text), "ms")]


def creates(text: str) -> float | None:
    return number(r"^\s+create machine\s+([\d.]+)/s", text)


def placement(out: Outputs) -> list[Row]:
    return [Row("creates, 20 workers", creates(out.get("20 workers", "")), "4 workers",
                creates(out.get("4 workers", "")), "/s")]


def proxy(out: Outputs) -> list[Row]:
    text = out.get("http", "")
    rate = r"^\s+{}\s+([\d.]+) req/s"
    return [Row("HTTP through the proxy, keep-alive", number(rate.format("bodega"), text),
                "nginx", number(rate.format("nginx"), text), "req/s")]


def pool(text: str, name: str) -> dict[str, float]:
    """A pool's figures, from the ``name: {json}`` line the jobs bench prints for it."""
    found = re.search(rf"^{re.escape(name)}: (\{{.*\}})$", text, re.MULTILINE)
    if found is None:
        return {}
    figures = json.loads(found.group(1))
    return {k: float(v) for k, v in figures.items() if isinstance(v, int | float)}


def jobs(out: Outputs) -> list[Row]:
    text = out.get("queues", "")
    ours, theirs = pool(text, "bodega"), pool(text, "blmove")
    return [Row(f"makespan of {JOBS:,} jobs", ours.get(f"makespan_s_{JOBS}"), "Redis BLMOVE",
                theirs.get(f"makespan_s_{JOBS}"), "s"),
            Row("job dispatch p50", ours.get("dispatch_p50_ms"), "Redis BLMOVE",
                theirs.get("dispatch_p50_ms"), "ms")]


def cli(out: Outputs) -> list[Row]:
    text = out.get("startup", "")
    line = r"^\s+bodega apps list\s+([\d.]+) ms .*baseline\s+([\d.]+) ms"
    return [Row("bodega apps list, start to exit", number(line, text), "python3 -c pass",
                number(line, text, 2), "ms")]


def network(out: Outputs) -> list[Row]:
    text = out.get("private", "")
    return [Row("machine to machine, private network", number(r"^overlay\s+([\d.]+)\s", text),
                "plain link", number(r"^plain\s+([\d.]+)\s", text), "req/s"),
            Row("private DNS", number(r"^dns bodega\s+([\d.]+) answers/s", text), "dnsmasq",
                number(r"^dns dnsmasq\s+([\d.]+) answers/s", text), "answers/s")]


JOBS = 1000
HEADLINES = (
    Headline("machines", {"start": ("bench.machines.start", "--only", "up", "--runs", "20")},
             machine_start),
    Headline("placement", {
        f"{n} workers": ("bench.placement.creates", "--workers-per-region", str(n),
                         "--creates", "800") for n in (20, 4)}, placement),
    Headline("proxy", {"http": ("bench.proxy.http", "--duration", "4", "--rounds", "2")},
             proxy),
    Headline("jobs", {"queues": ("bench.jobs.queues", "--phases", "dispatch,makespan",
                                 "--pools", "bodega,blmove", "--jobs", str(JOBS),
                                 "--rounds", "3", "--runs", "10")}, jobs),
    Headline("cli", {"startup": ("bench.cli.startup", "--runs", "10")}, cli),
    Headline("network", {"private": ("bench.network.private", "--duration", "4",
                                     "--rounds", "2", "--follows", "2")}, network),
)


def cell(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def table(rows: list[Row]) -> str:
    """The one table: figure, bodega, peer, ratio (bodega over peer); ``-`` where a bench
    gave no figure."""
    head = ("figure", "bodega", "peer", "", "ratio")
    body = [(f"{r.figure} ({r.unit})", cell(r.bodega), r.peer_name, cell(r.peer),
             "-" if r.ratio is None else f"{r.ratio:.2f}x") for r in rows]
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head))]
    lines = []
    for line in (head, *body):
        lines.append("  ".join((line[0].ljust(widths[0]), line[1].rjust(widths[1]),
                                line[2].ljust(widths[2]), line[3].rjust(widths[3]),
                                line[4].rjust(widths[4]))).rstrip())
    return "\n".join(lines)


def saved_name(headline: str, run: str) -> str:
    return f"{headline}-{run.replace(' ', '-')}.txt"


def run(argv: tuple[str, ...]) -> str:
    """One bench as its own command, its output shown as it comes and kept."""
    print(f"$ python -m {' '.join(argv)}", flush=True)
    with subprocess.Popen([sys.executable, "-m", *argv], stdout=subprocess.PIPE, text=True,
                          bufsize=1) as process:
        assert process.stdout is not None
        kept = []
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            kept.append(line)
    if process.returncode:
        print(f"(python -m {argv[0]} exited with {process.returncode})", flush=True)
    return "".join(kept)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    names = [h.name for h in HEADLINES]
    parser.add_argument("--only", type=lambda s: s.split(","), default=names,
                        help=f"which headlines, of {','.join(names)}")
    parser.add_argument("--save", type=Path, metavar="DIR", help="keep each bench's output")
    parser.add_argument("--from", dest="saved", type=Path, metavar="DIR",
                        help="read the outputs --save kept instead of running the benches")
    args = parser.parse_args()
    if unknown := set(args.only) - set(names):
        parser.error(f"no headline {', '.join(sorted(unknown))}")
    rows: list[Row] = []
    for headline in HEADLINES:
        if headline.name not in args.only:
            continue
        outputs = {}
        for name, argv in headline.runs.items():
            file = saved_name(headline.name, name)
            if args.saved is not None:
                path = args.saved / file
                outputs[name] = path.read_text() if path.exists() else ""
                continue
            outputs[name] = run(argv)
            if args.save is not None:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / file).write_text(outputs[name])
        rows += headline.rows(outputs)
    print()
    print(table(rows))
    missing = [r.figure for r in rows if r.ratio is None]
    if missing:
        print(f"no figure from its bench: {', '.join(missing)}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
