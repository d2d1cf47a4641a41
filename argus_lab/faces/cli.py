"""The ``argus-lab`` command line: run, show, join, recover, plan, signals, export, import, doctor."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from argus_lab import config
from argus_lab.app.commands import command
from argus_lab.errors import ArgusError
from argus_lab.store.db import default_store_path

EPILOG = """examples:
  argus-lab run examples/nested.py --signals host.wall,host.cpu --repeat 5 --store argus.duckdb
  argus-lab run train.py --signals gpu.time,hw:dram__bytes_read.sum --scope 'decode/**; instances=2:' -- --steps 3
  argus-lab show --store argus.duckdb --provenance
  argus-lab join --store argus.duckdb --all
  argus-lab recover --store argus.duckdb
  argus-lab plan --signals host.wall,gpu.time,hw:sm__throughput.avg.pct_of_peak_sustained_elapsed,compile.registers
  argus-lab signals
  argus-lab import trace.json.gz --store argus.duckdb    # torch.profiler; also .nsys-rep/.sqlite, .ncu-rep
  argus-lab export trace.json --store argus.duckdb       # Perfetto; report.html: HTML; a folder: Parquet
  argus-lab doctor
"""


JUPYTER_EXTRA = ("polars", "plotly", "ipywidgets", "IPython", "jupyterlab", "jupyter_server")
"""Modules of the `jupyter` extra (views, export, notebooks), which a plain `pip install argus_lab` lacks."""


def _shown(text: str) -> str:
    """``text`` safe for a terminal: control and bidi characters escaped line by line (newlines kept)."""
    from argus_lab.report.text import escape

    return "\n".join(escape(line) for line in text.split("\n"))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        metavar="PATH",
        default=None,
        help="the DuckDB evidence store (default ./argus.duckdb or $ARGUS_STORE), e.g. --store runs.duckdb",
    )


def _request_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-unknown-counters",
        action="store_true",
        help="plan hw: counters the chip's recorded metric names do not know (else: stop with the closest names)",
    )
    p.add_argument(
        "--signals",
        "-s",
        default="host.wall,host.cpu",
        metavar="LIST",
        help="comma-separated signals (see `argus-lab signals`), e.g. --signals host.wall,gpu.time",
    )
    p.add_argument(
        "--repeat",
        "-n",
        type=int,
        default=config.REPEAT,
        metavar="N",
        help=f"measured repetitions of the workload (default {config.REPEAT}), e.g. --repeat 10",
    )
    p.add_argument(
        "--warmup",
        "-w",
        type=int,
        default=config.WARMUP,
        metavar="N",
        help=f"repetitions run first and marked warm-up, left out of summaries (default {config.WARMUP})",
    )
    p.add_argument(
        "--scope",
        default="",
        metavar="SCOPE",
        help="which region instances to cover (docs/scopes.md), e.g. --scope 'decode/**; instances=2:'",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="argus-lab",
        description="Measure semantic code regions: plan interference-free runs, collect, store in DuckDB, report.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"argus-lab {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="plan and run a measurement of a script, then print the region table",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "script",
        help="the Python script to measure (or module:function), e.g. examples/nested.py; "
        "arguments for the script follow `--`, e.g. `argus-lab run train.py -- --steps 3`",
    )
    _request_args(run)
    _common(run)
    run.add_argument(
        "--on-error",
        choices=("continue", "stop"),
        default="continue",
        help="after a failed run: run the remaining runs (continue, default) or stop",
    )
    run.add_argument(
        "--launch",
        default="",
        metavar="PREFIX",
        help="start the workload through a multi-process launcher and measure every rank, "
        "e.g. --launch 'torchrun --nproc-per-node 2'",
    )
    run.add_argument(
        "--isolate",
        action="store_true",
        help="run every run in a fresh process (the CUPTI timing run included), e.g. when another profiler "
        "already holds CUPTI in this one",
    )
    run.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress (by default a bar per run on a terminal, a line per run start and end otherwise)",
    )
    run.add_argument(
        "--allow-skipped",
        action="store_true",
        help="exit 0 even when every run was skipped (e.g. GPU signals on a machine without a GPU); "
        "by default a request that measured nothing exits with status 3",
    )

    show = sub.add_parser(
        "show",
        help="print the region table and runs stored in a store",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(show)
    show.add_argument(
        "--run",
        action="append",
        default=None,
        metavar="RUN_ID",
        help="report these runs (repeatable); default: the latest request's runs",
    )
    show.add_argument(
        "--all",
        action="store_true",
        help="report every run in the store, one report per request (a request's runs belong together: its plan)",
    )
    show.add_argument(
        "--pool",
        action="store_true",
        help="with --all: one report over every run, pooling instances of the same region path across requests",
    )
    show.add_argument("--provenance", action="store_true", help="also print each run's command, versions, settings")

    plan = sub.add_parser(
        "plan",
        help="print the plan for a request without running it",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _request_args(plan)
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")

    join = sub.add_parser(
        "join",
        help="attribute the stored evidence of runs to region instances (runs measured here are joined already)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(join)
    join.add_argument("--run", action="append", default=None, metavar="RUN_ID", help="join these runs (repeatable)")
    join.add_argument("--all", action="store_true", help="join every run of the store (each request's runs together)")

    recover = sub.add_parser(
        "recover",
        help="finish runs left 'running' by a process that ended (killed, out of memory): store what their run "
        "folders hold, then join them (a store's first write does this too)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(recover)
    recover.add_argument("--no-join", action="store_true", help="store the recovered runs without joining them")

    sub.add_parser("signals", help="list every known signal: its unit, backend and what it measures")
    doctor = sub.add_parser(
        "doctor",
        help="check what this machine can measure (GPU, driver, CUDA, CUPTI, ncu, NVML, PM sampling, torch, Triton, "
        "native extension, pass model): each line ok or the fix",
    )
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.add_argument("--save", metavar="FILE", default=None, help="also write the checks as JSON to FILE")
    export = sub.add_parser(
        "export",
        help="write runs as a Perfetto trace (OUT.json), Parquet files (a folder) or a standalone HTML report",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(export)
    export.add_argument(
        "out", metavar="OUT", help="trace.json / trace.json.gz (Perfetto), report.html (HTML), a folder (Parquet)"
    )
    export.add_argument(
        "--format", choices=("perfetto", "parquet", "html"), default=None, help="the format (default: from OUT's name)"
    )
    export.add_argument(
        "--run",
        action="append",
        default=None,
        metavar="RUN_ID",
        help="runs (repeatable; default: the latest request that measured something: a newer request whose runs "
        "were all skipped is passed over, and the export says so)",
    )
    export.add_argument("--title", default="", help="the report's title (html)")

    imp = sub.add_parser(
        "import",
        help="import a trace recorded by another tool as a run (joined: attribution classes, region values)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(imp)
    imp.add_argument(
        "file", help="a torch.profiler (Kineto) .json/.json.gz, an Nsight Systems .nsys-rep/.sqlite, or an .ncu-rep"
    )
    imp.add_argument(
        "--format", choices=("kineto", "nsys", "ncu"), default=None, help="the file's format (default: detected)"
    )
    imp.add_argument(
        "--domain",
        default=None,
        help="NVTX domain whose ranges are regions (nsys, ncu; default: argus, else the only one with ranges)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``argus-lab``; returns the exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: list[str] = []
    if "--" in argv:  # everything after `--` goes to the measured script
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.script_args = script_args
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "show":
            return _show(args)
        if args.command == "plan":
            return _plan(args)
        if args.command == "join":
            return _join(args)
        if args.command == "recover":
            return _recover(args)
        if args.command == "doctor":
            from argus_lab.app.doctor import main as doctor_main

            return doctor_main(as_json=args.json, save=args.save)
        if args.command == "export":
            return _export(args)
        if args.command == "import":
            return _import(args)
        return _signals()
    except ArgusError as exc:
        print(f"argus-lab: error: {_shown(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left early (`argus-lab signals | head`): stop quietly, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return 0
    except KeyboardInterrupt as exc:
        store = Path(args.store) if getattr(args, "store", None) else default_store_path()
        how = "terminated (SIGTERM)" if exc.args and exc.args[0] == "SIGTERM" else "interrupted"
        print(
            f"argus-lab: {how}; the runs that ended are stored in {_shown(str(store))}, the interrupted one with the "
            f"repetitions it finished (`{_shown(command('show', store=store))}` lists them, "
            f"`{_shown(command('join', store=store))}` joins them)",
            file=sys.stderr,
        )
        return 143 if how != "interrupted" else 130
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in JUPYTER_EXTRA:
            raise
        print(
            f"argus-lab: error: `argus-lab {args.command}` needs {exc.name}, which is not installed; "
            'install the notebook extras: pip install "argus_lab[jupyter]"',
            file=sys.stderr,
        )
        return 2


def _run(args: argparse.Namespace) -> int:
    from argus_lab.app.measure import only_region, plan_from_options, run_plan
    from argus_lab.run.progress import lines
    from argus_lab.run.runtime import summarize, terminal_progress
    from argus_lab.run.workload import Workload

    workload = Workload.from_target(args.script, tuple(args.script_args))
    the_plan = plan_from_options(args, workload, args.store)  # an earlier timing run costs ncu runs
    print(the_plan.explain(), end="\n\n")
    done = run_plan(
        the_plan,
        workload,
        args.store,
        on_error=args.on_error,
        progress=None if args.quiet else (terminal_progress() or lines()),
        launch=args.launch,
        isolate=args.isolate,
    )
    report = done.report
    print(report.text())
    print(f"\nstored in {_shown(str(report.store.path))}\n{summarize(done.execution.results)}")
    for r, detail in done.failure_details():  # the workload's own traceback (file and line), after the summary
        print(f"\nrun {r.index} ({r.run_id}) {r.status}:\n" + "\n".join("  " + ln for ln in detail.splitlines()))
    implicit = workload.implicit_region
    if implicit and only_region(report, implicit):
        print(
            f"\n{args.script} marks no region: the whole workload was measured as region {implicit!r}. Mark parts "
            'of it with `with argus_lab.region("name"):` or `@argus_lab.region("name")` to measure them apart.'
        )
    reasons = done.skipped_reasons()
    if reasons:
        print(
            "\nargus-lab: nothing was measured: every run was skipped (" + "; ".join(reasons) + "). "
            "Pass --allow-skipped to accept that (exit 0).",
            file=sys.stderr,
        )
        return 0 if args.allow_skipped else 3
    return 0 if done.execution.ok else 1


def _version() -> str:
    from argus_lab.run.machine import package_version

    return package_version("argus_lab") or "unknown"


def _show(args: argparse.Namespace) -> int:
    from argus_lab.app.runs import runs_to_show
    from argus_lab.report import Report

    if args.pool and not args.all:
        print("argus-lab: error: --pool pools the runs of --all; pass both (`show --all --pool`)", file=sys.stderr)
        return 2
    shown = runs_to_show(args.store, args.run, every=args.all, pool=args.pool)
    if shown.note:
        print(shown.note)
    for k, group in enumerate(shown.groups):
        if group.request:
            runs = f"{len(group.run_ids or ())} run(s)"
            print(f"{'' if k == 0 else chr(10)}== request {group.request} ({runs}): {group.workload or '?'}")
        report = Report(shown.store, group.run_ids)
        print(report.text())
        if args.provenance:
            print("\nprovenance:\n" + report.provenance_text())
    if args.all and not args.pool and not shown.groups:
        print(f"(no runs in {_shown(str(shown.store.path))})")
    return 0


def _join(args: argparse.Namespace) -> int:
    from argus_lab.app.measure import join_runs, open_store

    store = open_store(args.store)
    summaries = join_runs(store, args.run, every=args.all)
    for summary in summaries:
        print(summary.text())
    print(f"joined {sum(len(s.run_ids) for s in summaries)} run(s) in {_shown(str(store.path))}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from argus_lab.app.exporting import export

    print(_shown(export(args.store, args.out, fmt=args.format, run_ids=args.run, title=args.title).text()))
    return 0


def _import(args: argparse.Namespace) -> int:
    from argus_lab.app.importing import import_trace

    options = {"domain": args.domain} if args.domain else {}
    result = import_trace(args.file, args.store, fmt=args.format, **options)
    print(_shown(result.text()))
    show = command("show", "--run", result.run_id, store=result.store_path)
    print(f"stored as run {result.run_id} in {_shown(str(result.store_path))}; see it with `{_shown(show)}`")
    return 0


def _recover(args: argparse.Namespace) -> int:
    from argus_lab.app.measure import recover_runs

    done = recover_runs(args.store, join=not args.no_join)
    for r in done.recovered:
        print(f"recovered {r.line()}")
    for summary in done.joined:
        print(summary.text())
    for folder in done.unknown_folders:
        print(f"not recovered: {folder} (the store has no record of this run; it was written for another store)")
    if not done.recovered:
        print("nothing to recover: no run is left 'running' by a process that ended")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from argus_lab.app.measure import plan_from_options

    the_plan = plan_from_options(args)
    print(the_plan.to_json() if args.json else the_plan.explain())
    return 0


def _signals() -> int:
    from argus_lab.app.signals import catalog, families
    from argus_lab.report.text import table

    rows = [(s.name, s.unit, s.backend, s.description) for s in catalog()]
    rows += [(f.prefix + "<metric>", "(the metric's)", f.backend, f.description) for f in families()]
    print(table(("signal", "unit", "backend", "what it measures"), rows, max_rows=len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
