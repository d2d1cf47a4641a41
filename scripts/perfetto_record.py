"""Load every export case of ``tests/perfetto_facts.py`` into Perfetto's trace processor; keep what it reported.

Run from the repository root with a ``trace_processor_shell`` (``scripts/build-trace-processor`` builds one):
``.venv/bin/python scripts/perfetto_record.py --shell /tmp/pf/out/tp/trace_processor_shell``.  Writes
``tests/data/perfetto/processor_facts.json`` (the processor's facts per case, its version, the command) and prints,
per case, the facts and whether they equal what the replay of the importer's rules makes of the same file.
``--trace FILE`` (repeatable) also loads a further exported trace (the 1 M-kernel benchmark's, say) and prints its
load time, slices, flows and import problems, without recording it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from perfetto_facts import (
    BROKEN_TRACE,
    CASES_BUILT,
    FACTS_FILE,
    PROBLEMS_SQL,
    check_shell,
    from_file,
    processor,
    read_in_processor,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shell", required=True, help="path of trace_processor_shell")
    ap.add_argument("--trace", action="append", default=[], help="a further exported trace to load and time")
    ap.add_argument("--no-write", action="store_true", help="print only; leave the recorded facts as they are")
    args = ap.parse_args()
    try:
        check_shell(args.shell)
    except FileNotFoundError as e:
        ap.error(str(e))
    version = subprocess.run([args.shell, "--version"], capture_output=True, text=True, check=True).stdout
    first = next((ln.strip() for ln in version.splitlines() if ln.strip()), "")
    print(first)
    cases: dict[str, object] = {}
    same = True
    for name, build in CASES_BUILT.items():
        with tempfile.TemporaryDirectory(prefix=f"argus-pf-{name}-") as tmp:
            out = build(Path(tmp))
            facts = read_in_processor(args.shell, out)
            replayed = from_file(json.loads(out.read_text()))
        agree = facts == replayed
        same &= agree
        cases[name] = facts
        print(f"{name}: slices {facts['slices']} on {len(facts['tracks'])} thread tracks, flows {facts['flows']} "
              f"(launch->record {facts['flows_launch_to_record']}), counters {sum(n for _, n in facts['counters'])}, "
              f"classes {facts['classes']}, problems {facts['problems']}; replay agrees: {agree}")  # fmt: skip
        if not agree:
            for key in facts:
                if facts[key] != replayed[key]:
                    print(f"  {key}: processor {str(facts[key])[:300]} | replay {str(replayed[key])[:300]}")
    with tempfile.TemporaryDirectory(prefix="argus-pf-broken-") as tmp:
        path = Path(tmp) / "broken.json"
        path.write_text(json.dumps(BROKEN_TRACE))
        broken = read_in_processor(args.shell, path)
    agree = broken == from_file(BROKEN_TRACE)
    same &= agree
    print(f"broken (SYNTHETIC): problems {broken['problems']}; replay agrees: {agree}")
    for trace in args.trace:
        t = time.perf_counter()
        tp = processor(args.shell, Path(trace), load_timeout=600)
        load = time.perf_counter() - t
        try:
            got = {
                "slices": next(iter(tp.query("SELECT count(*) AS n FROM slice"))).n,
                "flows": next(iter(tp.query("SELECT count(*) AS n FROM flow"))).n,
                "counters": next(iter(tp.query("SELECT count(*) AS n FROM counter"))).n,
                "problems": [(r.name, r.idx, r.value) for r in tp.query(PROBLEMS_SQL)],
            }
        finally:
            tp.close()
        print(f"{trace}: loaded in {load:.1f} s; {got}")
    if not args.no_write:
        FACTS_FILE.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "trace_processor": first,
            "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
            "command": "python scripts/perfetto_record.py --shell " + args.shell,
            "cases": cases,
            "broken": broken,
        }
        FACTS_FILE.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {FACTS_FILE}")
    print("replay agrees with the processor on every case" if same else "REPLAY DIFFERS from the processor")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
