"""Several recorded rounds of bench/timing_overhead.py read as one: every process of every round, one median.

A single round's figure moves by 0.02-0.04 from one evening to the next on the H200 (the host is a VM whose CPU speed
varies); pooling the processes of rounds that ran the same code path gives a figure with more processes behind it.
Each process keeps its own ratio (the median of its block pairs, as in the round itself); the pooled row is the
median over all of them, with the range, and the rounds it came from.  Rows are built by ``timing_overhead.aggregate``
itself, so a pool of one round reproduces that round's table.

    python bench/pool_rounds.py ROUND.json [ROUND.json ...] [--tools argus,proton,...] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.timing_overhead import aggregate  # noqa: E402


def pool(rounds: dict[str, dict[str, Any]], tools: set[str] | None = None) -> list[dict[str, Any]]:
    """One row per (workload, tool) over the processes of every round, each row naming the rounds it pooled."""
    procs = []
    seen: dict[tuple[str, str], set[str]] = {}
    for name, figures in rounds.items():
        for p in figures.get("processes", []):
            if tools is not None and p["tool"] not in tools:
                continue
            procs.append(p)
            for wl, r in p.get("workloads", {}).items():
                if r.get("ratios"):
                    seen.setdefault((wl, p["tool"]), set()).add(name)
    rows = aggregate(procs)
    for row in rows:
        row["rounds"] = sorted(seen.get((row["workload"], row["tool"]), set()))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | tool | pooled ratio | processes (range) | blocks (range) | rounds |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['tool']} | {r['ratio']:.3f}x | {r['processes']} ({r['proc_min']:.3f}-"
            f"{r['proc_max']:.3f}) | {r['pairs']} ({r['pair_min']:.3f}-{r['pair_max']:.3f}) | "
            f"{', '.join(r['rounds'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rounds", nargs="+", type=Path, help="timing-overhead.json files written by timing_overhead.py")
    ap.add_argument("--tools", default="", help="comma-separated tools to keep (default: all)")
    ap.add_argument("--json", type=Path, default=None, help="also write the pooled rows here")
    args = ap.parse_args(argv)
    rounds: dict[str, dict[str, Any]] = {}
    for path in args.rounds:
        if not path.is_file():
            ap.error(f"{path} does not exist; pass the timing-overhead.json a round of timing_overhead.py wrote")
        figures = json.loads(path.read_text())
        if "processes" not in figures:
            ap.error(f"{path} has no 'processes'; it is not a timing-overhead.json of bench/timing_overhead.py")
        name = path.parent.name or str(path)
        if name in rounds:
            ap.error(
                f"two rounds are named {name!r} (a round is named by its folder, and the same file twice would count "
                "its processes twice); pass each round's timing-overhead.json from its own folder, once"
            )
        rounds[name] = figures
    tools = {t for t in args.tools.split(",") if t} or None
    rows = pool(rounds, tools)
    print(table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"rounds": [str(p) for p in args.rounds], "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
