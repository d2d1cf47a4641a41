"""IPython magics: measure notebook cells as regions and show reports (``%load_ext argus_lab``).

``%%argus_region NAME``
    Run the cell as one instance of region ``NAME`` (inside whatever measurement is active; the last expression
    is still displayed and the cell's own exceptions keep their traceback).
``%%argus [-s SIGNALS] [--scope SCOPE] [-n REPEAT] [-w WARMUP] [--store PATH] [--setup marked|history|none]
[--on-error continue|stop] [-o VAR] [--title TEXT] [--no-show]``
    Plan and run a measurement of the cell and display its report.  In-process runs execute the cell in the
    notebook's namespace.  Child-process runs (Nsight Compute) replay the cell in a fresh Python process, after
    the *setup cells*: by default the cells run with ``%%argus_setup`` (``--setup marked``), or every earlier
    input of this session (``--setup history``; inputs that use IPython magics are left out and reported).
``%%argus_setup [NAME]``
    Run the cell normally and remember its source as a setup cell for replays (re-running replaces it).
``%argus plan|show|runs|export PATH|import FILE|store PATH|setup [list|clear]|panel [CALLABLE]|doctor|help``
    Show a plan without running it, the last report, the store's runs; write the last report's runs as a Perfetto
    trace (``x.json``), Parquet files (a folder) or a standalone HTML file (``x.html``); import a torch.profiler
    trace, an Nsight Systems report or an ``.ncu-rep`` as a run; set the session's store; list or forget setup
    cells; open the signal panel; check what this kernel's machine can measure (``doctor``: one line per part, each
    ok or the fix).

Limits of replays (child runs): the replay sees only the setup cells and the measured cell, so state built
interactively without a setup cell is missing; IPython syntax (magics, ``!shell``) cannot be replayed; anything
random differs unless the sources seed it.  Errors of argus_lab are one ``UsageError`` line; an exception raised
by the cell itself is shown with its own traceback (only the cell's frames), after the report of what was measured.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import keyword
import os
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser

from argus_lab.errors import ArgusError
from argus_lab.faces.cell_code import DEFAULT_REPEAT, DEFAULT_WARMUP, SETUP_MODES, measure_line
from argus_lab.run.workload import Workload

if TYPE_CHECKING:
    from collections.abc import Callable

    from IPython.core.interactiveshell import InteractiveShell

    from argus_lab.plan import Plan, PlannedRun
    from argus_lab.report import Report
    from argus_lab.run.runtime import RunResult


@dataclass(frozen=True)
class CellWorkload(Workload):
    """A notebook cell: in this process it runs ``func`` (the cell in the user namespace); a child process
    replays ``target`` after the ``setup`` sources (:meth:`Workload.to_dict` carries only those)."""

    def load(self) -> Callable[[], None]:
        """Execute in the notebook's namespace when a function is given, else replay like any cell."""
        if self.func is not None:
            fn = self.func
            return lambda: (fn(), None)[1]
        return super().load()


def _parser(prog: str, description: str) -> MagicArgumentParser:
    return MagicArgumentParser(prog=prog, description=description, add_help=False)  # type: ignore[no-untyped-call]


def _request_options(p: MagicArgumentParser, repeat: int = DEFAULT_REPEAT) -> None:
    p.add_argument("-s", "--signals", default="host.wall,host.cpu", help="comma-separated signals")
    p.add_argument("--scope", default="", help="which region instances, e.g. 'decode/**; instances=2:'")
    p.add_argument("-n", "--repeat", type=int, default=repeat, help=f"measured repetitions (default {repeat})")
    p.add_argument(
        "-w", "--warmup", type=int, default=DEFAULT_WARMUP, help=f"warm-up repetitions (default {DEFAULT_WARMUP})"
    )


def measure_parser() -> MagicArgumentParser:
    """The options of ``%%argus``."""
    p = _parser("%%argus", "Plan and run a measurement of this cell, then display the report.")
    _request_options(p)
    p.add_argument("--store", default=None, help="evidence store (default: %%argus store, $ARGUS_STORE, argus.duckdb)")
    p.add_argument("--setup", default="marked", choices=SETUP_MODES, help="setup cells for replays in child runs")
    p.add_argument("--on-error", default="continue", choices=("continue", "stop"), help="after a failed run")
    p.add_argument("-o", "--out", default=None, metavar="VAR", help="also store the Report in this variable")
    p.add_argument("--title", default="", help="title of the displayed report")
    p.add_argument("--no-show", action="store_true", help="do not display the report")
    return p


class _RegionWrap(ast.NodeTransformer):
    """Wraps a cell's statements in ``with <marker>:``; a last expression is kept displayable after the block."""

    def __init__(self, marker_name: str, result_name: str) -> None:
        self.marker_name = marker_name
        self.result_name = result_name

    def visit_Module(self, node: ast.Module) -> ast.Module:
        body = list(node.body)
        tail: list[ast.stmt] = []
        if body and isinstance(body[-1], ast.Expr):
            last = body.pop()
            assert isinstance(last, ast.Expr)
            store = ast.Name(id=self.result_name, ctx=ast.Store())
            body.append(ast.copy_location(ast.Assign(targets=[store], value=last.value), last))
            tail.append(ast.copy_location(ast.Expr(value=ast.Name(id=self.result_name, ctx=ast.Load())), last))
        item = ast.withitem(context_expr=ast.Name(id=self.marker_name, ctx=ast.Load()))
        wrapped = ast.With(items=[item], body=body or [ast.Pass()])
        if body:
            ast.copy_location(wrapped, body[0])
        node.body = [wrapped, *tail]
        ast.fix_missing_locations(node)
        return node


def split_line(line: str, magic: str) -> list[str]:
    """The words of a magic's line, split like a shell; an unbalanced quote is a :class:`UsageError` saying so."""
    try:
        return shlex.split(line)
    except ValueError as exc:
        msg = (
            f"cannot read the {magic} line ({exc}): a quote is not closed; close it, e.g. "
            f"`{magic} -s 'host.wall,host.cpu'`"
        )
        raise UsageError(msg) from None


def _check_out_name(name: str | None) -> None:
    """``-o VAR`` must be a Python name that hides nothing of Python's own (a keyword or a builtin)."""
    if name is None:
        return
    if not name.isidentifier() or keyword.iskeyword(name):
        msg = f"-o {name!r} is not a Python variable name; use letters, digits and _, e.g. `-o report`"
        raise UsageError(msg)
    if hasattr(builtins, name):
        msg = (
            f"-o {name} would hide Python's builtin {name!r} in the notebook; choose another name, e.g. "
            f"`-o {name}_report`"
        )
        raise UsageError(msg)


@magics_class
class ArgusMagics(Magics):
    """The argus magics (registered by ``%load_ext argus_lab``)."""

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell)
        self.setup_cells: dict[str, str] = {}
        self.last_report: Report | None = None
        self.store_path: str | None = None
        self.last_plan: Plan | None = None

    # -- %%argus_region ---------------------------------------------------------------------------------------
    @cell_magic
    def argus_region(self, line: str, cell: str) -> None:
        """Run the cell as one instance of region NAME: ``%%argus_region attn``.

        Inside an active measurement the cell is simply one more region instance.  Otherwise the cell is measured
        once (host.wall, host.cpu) into the session's store and one summary line is printed.
        """
        from argus_lab.regions import active_recorder, region

        name = line.strip()
        try:
            marker = region(name, module="__main__")
        except ArgusError as exc:
            raise UsageError(str(exc)) from None
        if active_recorder() is not None:
            self._run_in_region(marker, cell)
            return
        from argus_lab.faces.measure import plan, run_plan

        raised: list[BaseException] = []

        def run_once() -> None:
            result = self._run_in_region(marker, cell)
            error = result.error_in_exec or result.error_before_exec
            if error is not None:  # the cell's traceback is shown already; the run records the failure
                raised.append(error)
                raise error

        try:
            the_plan = plan("host.wall,host.cpu", repeat=1, warmup=0)
            report = run_plan(the_plan, Workload.of_callable(run_once), self._store(None)).report
        except ArgusError as exc:
            raise UsageError(str(exc)) from None
        self.last_report = report
        if raised:
            error = raised[0]
            msg = (
                f"region {name} failed: the cell raised {type(error).__name__}: {error} (its traceback is above); "
                f"the run is stored as failed ({', '.join(report.run_ids)} in {report.store.path}), with the "
                "instance and its error"
            )
            raise UsageError(msg)
        from argus_lab.units import fmt

        values = {r.signal: fmt(r.median, r.unit) for r in report.regions if r.path.split("/")[-1] == name}
        summary = ", ".join(f"{k} {v}" for k, v in sorted(values.items())) or "no instance recorded"
        print(f"argus: region {name}: {summary} (run {', '.join(report.run_ids)} in {report.store.path})")

    def _run_in_region(self, marker: Any, cell: str) -> Any:
        """Run the cell inside ``marker`` (IPython shows its exceptions); returns IPython's ExecutionResult."""
        marker_name, result_name = "__argus_region_marker__", "__argus_region_result__"
        shell: Any = self.shell
        ns = shell.user_ns
        ns[marker_name] = marker
        transformer = _RegionWrap(marker_name, result_name)
        shell.ast_transformers.append(transformer)
        try:
            return shell.run_cell(cell, store_history=False)
        finally:
            shell.ast_transformers.remove(transformer)
            ns.pop(marker_name, None)
            ns.pop(result_name, None)

    # -- %%argus_setup ----------------------------------------------------------------------------------------
    @cell_magic
    def argus_setup(self, line: str, cell: str) -> None:
        """Run the cell and remember it as a setup cell for replays: ``%%argus_setup [NAME]``."""
        name = line.strip() or "cell-" + hashlib.sha1(cell.encode(), usedforsecurity=False).hexdigest()[:8]
        shell: Any = self.shell
        result = shell.run_cell(cell, store_history=False)
        if result.success:
            self.setup_cells[name] = cell

    # -- %%argus / %argus -------------------------------------------------------------------------------------
    @line_cell_magic
    def argus(self, line: str, cell: str | None = None) -> Any:
        """``%%argus [options]`` measures the cell; ``%argus help`` lists the line commands."""
        try:
            if cell is not None:
                return self._measure(line, cell)
            return self._command(line)
        except ArgusError as exc:
            raise UsageError(str(exc)) from None

    def _store(self, given: str | None) -> str | None:
        return given or self.store_path

    def _setup_sources(self, mode: str) -> tuple[tuple[str, ...], list[str]]:
        shell: Any = self.shell
        notes: list[str] = []
        if mode == "none":
            return (), notes
        if mode == "marked":
            raw = list(self.setup_cells.values())
        else:
            history = list(shell.history_manager.input_hist_raw)[1:-1]  # raw inputs, without this cell
            raw = [h for h in history if h.strip()]
        out = []
        for src in raw:
            py = shell.transform_cell(src)
            if "get_ipython()" in py:
                notes.append(f"left out of the replay (uses IPython syntax): {src.strip().splitlines()[0][:60]!r}")
                continue
            out.append(py)
        return tuple(out), notes

    def _measure(self, line: str, cell: str) -> Any:
        from argus_lab.faces.measure import plan, run_plan

        args = measure_parser().parse_args(split_line(line, "%%argus"))
        _check_out_name(args.out)
        the_plan = plan(args.signals, scope=args.scope, repeat=args.repeat, warmup=args.warmup)
        shell: Any = self.shell
        source = shell.transform_cell(cell)
        filename = shell.compile.cache(source, shell.execution_count)
        code = compile(source, filename, "exec")
        ns = shell.user_ns
        raised: list[tuple[BaseException, Any]] = []

        def run_cell_once() -> None:
            try:
                exec(code, ns)
            except BaseException as exc:
                # the traceback as it is here: this frame, then the cell's frames (argus frames come later)
                tb = exc.__traceback__
                raised.append((exc, tb.tb_next if tb is not None else None))
                raise

        setup, notes = self._setup_sources(args.setup)
        needs_child = any(r.launcher is not None for r in the_plan.runs)
        if needs_child and "get_ipython()" in source:
            notes.append("this cell uses IPython syntax, which a replay in a child process cannot run")
        if needs_child and not setup and args.setup == "marked":
            notes.append(
                "child runs replay this cell with no setup cells: run the cells that define its inputs with "
                "%%argus_setup, or use --setup history"
            )
        workload = CellWorkload("cell", source, setup=setup, cwd=os.getcwd(), func=run_cell_once)
        progress = _NotebookProgress(len(the_plan.runs))
        for note in notes:
            print(f"argus: {note}")
        measured = run_plan(the_plan, workload, self._store(args.store), on_error=args.on_error, progress=progress)
        report = measured.report
        self.last_report = report
        if args.out:
            ns[args.out] = report
        if not args.no_show:
            from IPython.display import display

            from argus_lab.views.bundle import ReportView

            display(ReportView(report, title=args.title))  # type: ignore[no-untyped-call]
        if raised:
            exc, tb = raised[0]
            shell.showtraceback((type(exc), exc, tb))
            msg = f"the measured cell raised {type(exc).__name__}; the report above keeps what was measured before"
            raise UsageError(msg)
        return None

    def _command(self, line: str) -> Any:
        words = split_line(line, "%argus")
        if not words or words[0] in ("help", "-h", "--help"):
            print(__doc__)
            return None
        cmd, rest = words[0], words[1:]
        handlers: dict[str, Callable[[list[str]], Any]] = {
            "plan": self._plan,
            "show": self._show,
            "runs": self._runs,
            "export": self._export,
            "import": self._import,
            "store": self._set_store,
            "setup": self._setup_cmd,
            "panel": self._panel,
            "doctor": self._doctor,
        }
        if cmd not in handlers:
            msg = f"unknown %argus command {cmd!r}; use one of: {', '.join(handlers)} (`%argus help` explains them)"
            raise UsageError(msg)
        return handlers[cmd](rest)

    def _doctor(self, rest: list[str]) -> None:
        from argus_lab.faces.doctor import diagnose, render, to_json

        p = _parser("%argus doctor", "Check what this machine can measure: each line ok or the fix.")
        p.add_argument("--json", action="store_true", help="print the checks as JSON")
        args = p.parse_args(rest)
        checks = diagnose()
        print(to_json(checks) if args.json else render(checks))

    def _plan(self, rest: list[str]) -> None:
        from argus_lab.faces.measure import plan

        p = _parser("%argus plan", "Show the plan of a request without running it.")
        _request_options(p)
        args = p.parse_args(rest)
        the_plan = plan(args.signals, scope=args.scope, repeat=args.repeat, warmup=args.warmup)
        self.last_plan = the_plan
        print(the_plan.explain())

    def _report_for(self, args: Any) -> Report:
        from argus_lab.report import Report
        from argus_lab.store import Store

        if args.run or args.store or self.last_report is None:
            return Report(Store(self._store(args.store)), args.run or None)
        return self.last_report

    def _show(self, rest: list[str]) -> Any:
        from argus_lab.views.bundle import ReportView

        p = _parser("%argus show", "Display the last report (or given runs of a store).")
        p.add_argument("--store", default=None)
        p.add_argument("--run", action="append", default=None, metavar="RUN_ID")
        p.add_argument("--title", default="")
        args = p.parse_args(rest)
        return ReportView(self._report_for(args), title=args.title)

    def _runs(self, rest: list[str]) -> Any:
        from argus_lab.store import Store
        from argus_lab.views import evidence
        from argus_lab.views.tables import TableView

        p = _parser("%argus runs", "List the runs of the store, newest first.")
        p.add_argument("--store", default=None)
        p.add_argument("-n", "--limit", type=int, default=20)
        args = p.parse_args(rest)
        return TableView(evidence.run_list(Store(self._store(args.store)), args.limit), "runs (newest first)")

    def _export(self, rest: list[str]) -> None:
        from argus_lab.faces.exporting import export

        p = _parser(
            "%argus export",
            "Write the last report's runs: x.json / x.json.gz (Perfetto trace), x.html (report), a folder (Parquet).",
        )
        p.add_argument("path")
        p.add_argument("--format", choices=("perfetto", "parquet", "html"), default=None)
        p.add_argument("--store", default=None)
        p.add_argument("--run", action="append", default=None, metavar="RUN_ID")
        p.add_argument("--title", default="")
        args = p.parse_args(rest)
        if args.run or args.store or self.last_report is None:
            result = export(self._store(args.store), args.path, fmt=args.format, run_ids=args.run, title=args.title)
        else:
            report = self.last_report
            result = export(report.store, args.path, fmt=args.format, run_ids=list(report.run_ids), title=args.title)
        print(result.text())

    def _import(self, rest: list[str]) -> Any:
        from argus_lab.faces.importing import import_trace
        from argus_lab.report import Report

        p = _parser("%argus import", "Import a torch.profiler trace, an Nsight Systems report or an .ncu-rep as a run.")
        p.add_argument("path")
        p.add_argument("--format", choices=("kineto", "nsys", "ncu"), default=None)
        p.add_argument("--store", default=None)
        p.add_argument("--domain", default=None)
        args = p.parse_args(rest)
        options = {"domain": args.domain} if args.domain else {}
        result = import_trace(args.path, self._store(args.store), fmt=args.format, **options)
        print(result.text())
        self.last_report = Report(str(result.store_path), [result.run_id])
        return None

    def _set_store(self, rest: list[str]) -> None:
        if len(rest) != 1:
            msg = "usage: %argus store PATH (e.g. `%argus store argus.duckdb`)"
            raise UsageError(msg)
        self.store_path = rest[0]
        print(f"argus: measurements of this session go to {rest[0]}")

    def _setup_cmd(self, rest: list[str]) -> None:
        if rest and rest[0] == "clear":
            self.setup_cells.clear()
            print("argus: no setup cells are marked")
            return
        if not self.setup_cells:
            print("argus: no setup cells are marked (run cells with %%argus_setup)")
        for name, src in self.setup_cells.items():
            first = next((ln for ln in src.splitlines() if ln.strip()), "")
            print(f"{name}: {first[:70]}")

    def _panel(self, rest: list[str]) -> Any:
        from argus_lab.faces.panel import SignalPanel

        target = None
        if rest:
            shell: Any = self.shell
            if rest[0] not in shell.user_ns:
                msg = f"no variable {rest[0]!r} in the notebook; pass the name of a callable: `%argus panel step`"
                raise UsageError(msg)
            target = shell.user_ns[rest[0]]
        return SignalPanel(target=target, store=self.store_path)


class _NotebookProgress:
    """Progress of a plan as one updating line of output (works without widgets and in nbconvert)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.handle: Any = None

    def __call__(self, event: str, run: PlannedRun, result: RunResult | None) -> None:
        from IPython.display import display

        if event == "start":
            text = f"argus: run {run.index + 1}/{self.total} [{', '.join(run.backends)}] running..."
        else:
            self.done += 1
            status = result.status if result is not None else "?"
            text = f"argus: run {run.index + 1}/{self.total} [{', '.join(run.backends)}] {status}"
        bundle = {"text/plain": text}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)  # type: ignore[no-untyped-call]
        else:
            self.handle.update(bundle, raw=True)


def load(ipython: InteractiveShell) -> None:
    """Register the magics and make plotly figures survive nbconvert (its ``notebook`` renderer)."""
    ipython.register_magics(ArgusMagics)
    from argus_lab.views import init_notebook

    init_notebook()


__all__ = ["ArgusMagics", "CellWorkload", "load", "measure_line", "measure_parser"]
