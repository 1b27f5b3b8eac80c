"""Region expressions: ``ams``, ``ams,fra``, ``lhr,eu``, ``any``.

An expression is an ordered, comma-separated list of region codes and
aliases. Aliases expand to the known regions they cover, in a stable order;
a code appears once, at its first mention. Placement tries the regions in
order and never goes outside the list, so ``ams`` fails rather than landing
in ``fra``. Geography is Fly's: codes the table does not know belong only to
``any``.
"""

from __future__ import annotations

import re

_CODE = re.compile(r"^[a-z][a-z0-9-]{1,15}$")

# Fly's region codes by geography, enough to make the aliases useful.
GEO: dict[str, str] = {
    **dict.fromkeys(("ams", "arn", "cdg", "fra", "lhr", "mad", "otp", "waw", "ber"), "eu"),
    **dict.fromkeys(("atl", "bos", "den", "dfw", "ewr", "iad", "lax", "mia", "ord", "phx",
                     "sea", "sjc"), "us"),
    **dict.fromkeys(("yul", "yyz"), "ca"),
    **dict.fromkeys(("gru", "gig", "bog", "eze", "scl", "qro", "gdl"), "sa"),
    **dict.fromkeys(("bom", "hkg", "nrt", "sin", "syd", "mel"), "apac"),
    **dict.fromkeys(("jnb",), "af"),
}
ALIASES = {
    "eu": ("eu",), "us": ("us",), "na": ("us", "ca"), "sa": ("sa",), "apac": ("apac",),
    "af": ("af",),
}


def parse(expression: str, known: list[str], nearest: str | None = None) -> tuple[str, ...]:
    """The regions ``expression`` asks for, in order; ValueError on a malformed one.

    ``known`` are the regions that have workers (the order ``any`` uses after
    ``nearest``). Codes that no worker serves are kept: they simply have no
    candidates, and the error then says so.
    """
    out: list[str] = []
    for raw in expression.split(","):
        part = raw.strip().lower()
        if not part:
            continue
        if part == "any":
            expanded = sorted(known, key=lambda r: (r != nearest, r))
        elif part in ALIASES:
            geos = ALIASES[part]
            expanded = sorted((r for r in known if GEO.get(r) in geos),
                              key=lambda r: (r != nearest, r))
        elif _CODE.match(part):
            expanded = [part]
        else:
            raise ValueError(f"invalid region {raw.strip()!r}: use codes like ams, aliases like "
                             "eu, or any, separated by commas")
        for region in expanded:
            if region not in out:
                out.append(region)
    if not out and not expression.strip():
        raise ValueError("region is empty")
    return tuple(out)
