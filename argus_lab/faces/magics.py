"""IPython magics: measure notebook cells as regions and show reports (``%load_ext argus_lab``).

``%%argus_region NAME``
    Run the cell as one instance of region ``NAME`` (inside whatever measurement is active; the last expression
    is still displayed and the cell's own exceptions keep their traceback).
``%%argus [-s SIGNALS] [--scope SCOPE] [-n REPEAT] [-w WARMUP] [--store PATH] [--setup marked|history|none]
[--on-error continue|stop] [-o VAR] [--title TEXT] [--region NAME] [--quiet] [--no-show]``
    Plan and run a measurement of the cell and display its report.  In-process runs execute the cell in the
    notebook's namespace.  A cell that enters no region is measured as one region, ``cell_N`` after its prompt
    ``[N]`` (or ``--region NAME``), like ``%%timeit``; regions it does enter are measured as they are.  One output
    line shows the progress (run, repetition, ncu's kernels, the time left) and is updated in place (``--quiet``:
    none).
    Child-process runs (Nsight Compute) replay the cell in a fresh Python process, after the *setup cells*: by
    default the cells run with ``%%argus_setup`` (``--setup marked``), or every earlier input of this session
    (``--setup history``; inputs that use IPython magics are left out and reported).
``%%argus_setup [NAME]``
    Run the cell normally and remember its source as a setup cell for replays (re-running replaces it).  A setup
    cell that raises is not remembered and fails the magic, so *Run All* stops there.
``%%argus_needs_gpu WHAT``
    Run the rest of the cell only on a machine with an NVIDIA GPU; elsewhere print one line with ``WHAT`` (what the
    cell does and where the recorded result is shown) and go on (``argus_lab.faces.gpu_cells``).
``%argus plan|show [--latest]|runs|export PATH|import FILE|store [PATH]|setup [list|clear]|panel [CALLABLE]|doctor``
    Show a plan without running it, the last report of this kernel (``--latest``: the store's newest request),
    the store's runs; write the last report's runs as a Perfetto trace (``x.json``), Parquet files (a folder) or a
    standalone HTML file (``x.html``); import a torch.profiler trace, an Nsight Systems report or an ``.ncu-rep``
    as a run; show or set the kernel's store (its folder must exist); list or forget setup cells; open the signal
    panel; check what this kernel's machine can measure (``doctor``: one line per part, each ok or the fix).
``%argus sql [--store PATH] QUERY`` / ``%%argus sql [--store PATH]`` (the query in the cell)
    Query the store (a polars DataFrame), through argus_lab's own access: nothing is held open between queries,
    so measurements in this kernel still write (``argus_lab.sql`` in code).
``%argus help``
    This help.

Limits of replays (child runs): the replay sees only the setup cells and the measured cell, so state built
interactively without a setup cell is missing; IPython syntax (magics, ``!shell``) cannot be replayed; anything
random differs unless the sources seed it.  Errors of argus_lab are one ``UsageError`` line; an exception raised
by the cell itself is shown with its own traceback (only the cell's frames), after the report of what was measured.
"""

from __future__ import annotations

import argparse
import builtins
import hashlib
import json
import keyword
import os
import re
import shlex
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser

from argus_lab.app.cell_code import DEFAULT_REPEAT, DEFAULT_WARMUP, SETUP_MODES, measure_line
from argus_lab.app.cells import CellPlace, RegionWrap, cell_label, checked_store, region_check, setup_cells
from argus_lab.errors import ArgusError
from argus_lab.run.progress import throttled
from argus_lab.views.progress import NotebookLine

if TYPE_CHECKING:
    from collections.abc import Callable

    from IPython.core.interactiveshell import InteractiveShell

    from argus_lab.plan import Plan
    from argus_lab.report import Report


def _parser(prog: str, description: str) -> MagicArgumentParser:
    return MagicArgumentParser(prog=prog, description=description, add_help=False)  # type: ignore[no-untyped-call]


def _request_options(p: MagicArgumentParser, repeat: int = DEFAULT_REPEAT) -> None:
    p.add_argument("-s", "--signals", default="host.wall,host.cpu", help="comma-separated signals")
    p.add_argument(
        "--allow-unknown-counters", action="store_true", help="plan hw: counters the chip's metric list lacks"
    )
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
    p.add_argument(
        "--isolate",
        action="store_true",
        help="replay the cell in a fresh process for every run (with the setup cells), e.g. after torch.profiler",
    )
    p.add_argument("-o", "--out", default=None, metavar="VAR", help="also store the Report in this variable")
    p.add_argument("--title", default="", help="title of the displayed report")
    p.add_argument(
        "--region", default="", metavar="NAME", help="name of the region a cell without regions is measured as"
    )
    p.add_argument("--no-show", action="store_true", help="do not display the report")
    p.add_argument("-q", "--quiet", action="store_true", help="show no progress line while the runs run")
    p.add_argument("--origin", default="", help=argparse.SUPPRESS)  # set by the JupyterLab panel: its cells
    return p


def notebook_path(shell: Any) -> str:
    """The path of the kernel's notebook relative to the Jupyter root ("" outside Jupyter)."""
    ns = getattr(shell, "user_ns", {}) or {}
    return str(ns.get("__session__") or os.environ.get("JPY_SESSION_NAME") or "")


def _cell_id(shell: Any) -> str:
    """The id of the notebook cell being executed ("" when the request did not come from a cell)."""
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else None
    except Exception:  # another kernel implementation
        parent = None
    meta = (parent or {}).get("metadata") or {}
    return str(meta.get("cellId") or "")


def prompt_number(shell: Any) -> int:
    """The ``[N]`` of the cell being executed.  IPython counts the cell before running it (``execution_count`` is
    then N + 1), so the number is the one the running cell was compiled under: the newest in the compile cache."""
    numbers = getattr(getattr(shell, "compile", None), "_filename_map", {}).values()
    return int(max(numbers)) if numbers else int(shell.execution_count)


class _Json:
    """A value shown as JSON (what the JupyterLab panel reads back from a kernel's ``user_expressions``)."""

    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value

    def _repr_json_(self) -> dict[str, Any]:
        return self.value

    def __repr__(self) -> str:
        return json.dumps(self.value)


def kernel_store(shell: Any = None) -> _Json:
    """Which store this kernel's measurements go to: ``{"store": absolute path, "source": "%argus store" |
    "ARGUS_STORE" | "default", "cwd", "notebook"}`` (the JupyterLab panel follows it)."""
    from argus_lab.app.cells import kernel_store as store_of_kernel

    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    magics = shell.magics_manager.registry.get("ArgusMagics") if shell is not None else None
    return _Json(store_of_kernel(getattr(magics, "store_path", None), notebook_path(shell)).to_dict())


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


_IPYTHON_NAMES = re.compile(r"_+|_i+|_[ido]h|_i?\d+|In|Out|get_ipython|exit|quit")
"""Names IPython keeps in a notebook's namespace (output history ``_``, ``__``, ``_7``; input history ``_i``,
``_i7``, ``In``, ``Out``; ``_oh``, ``_ih``, ``_dh``) or that it needs itself."""


def _check_out_name(name: str | None, shell: Any = None) -> None:
    """``-o VAR`` must be a Python name that hides nothing of Python's own (a keyword, a builtin, a dunder name such
    as ``__builtins__``) or of IPython's (``In``, ``Out``, ``_``, ``_i3``, ...)."""
    if name is None:
        return
    if not name.isidentifier() or keyword.iskeyword(name):
        msg = f"-o {name!r} is not a Python variable name; use letters, digits and _, e.g. `-o report`"
        raise UsageError(msg)
    hidden = getattr(shell, "user_ns_hidden", None) or {}
    if (name.startswith("__") and name.endswith("__")) or _IPYTHON_NAMES.fullmatch(name) or name in hidden:
        msg = (
            f"-o {name} would replace {name!r}, which Python or IPython keeps in the notebook's namespace (later "
            f"cells would break); choose another name, e.g. `-o report`"
        )
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
        self._markers: dict[tuple[str, str], Any] = {}
        self._origin_cells: dict[str, str] = {}  # region name -> "cell 2 of demo.ipynb" (cells the panel runs)
        from argus_lab.regions import add_source_namer

        self._namer = _CellNamer(shell)
        add_source_namer(self._namer)

    # -- %%argus_region ---------------------------------------------------------------------------------------
    @cell_magic
    def argus_region(self, line: str, cell: str) -> None:
        """Run the cell as one instance of region NAME: ``%%argus_region attn``.

        Inside an active measurement the cell is simply one more region instance.  Otherwise the cell is measured
        once (host.wall, host.cpu) into the session's store and one summary line is printed.
        """
        from argus_lab.regions import active_recorder

        name = line.strip()
        try:
            region_check(name)
        except ArgusError as exc:
            raise UsageError(str(exc)) from None
        marker = self._cell_marker(name)
        if active_recorder() is not None:
            self._run_in_region(marker, cell)
            return
        from argus_lab.app.cells import measure_region_cell, region_cell_failure, region_cell_summary

        raised: list[BaseException] = []

        def run_once() -> None:
            result = self._run_in_region(marker, cell)
            error = result.error_in_exec or result.error_before_exec
            if error is not None:  # the cell's traceback is shown already; the run records the failure
                raised.append(error)
                raise error

        try:
            report = measure_region_cell(run_once, marker.region.file, self._place().origin(), self._store(None)).report
        except ArgusError as exc:
            raise UsageError(str(exc)) from None
        self.last_report = report
        if raised:
            raise UsageError(region_cell_failure(report, name, raised[0]))
        print(f"argus: {region_cell_summary(report, name)}")

    def _cell_marker(self, name: str) -> Any:
        """The marker of region ``name`` declared by the running cell (its source is the cell, not this module)."""
        from argus_lab.regions import Region, RegionMarker

        place = self._place()  # run by the panel's code, the cell is known from the origin it passed (its position)
        label = place.label() if place.cell_id else self._origin_cells.get(name) or cell_label(None, place.notebook)
        key = (name, label)
        if key not in self._markers:
            self._markers[key] = RegionMarker(Region(name=name, kind="host", module="__main__", file=label, line=1))
        return self._markers[key]

    def _run_in_region(self, marker: Any, cell: str) -> Any:
        """Run the cell inside ``marker`` (IPython shows its exceptions); returns IPython's ExecutionResult."""
        marker_name, result_name = "__argus_region_marker__", "__argus_region_result__"
        shell: Any = self.shell
        ns = shell.user_ns
        ns[marker_name] = marker
        transformer = RegionWrap(marker_name, result_name)
        shell.ast_transformers.append(transformer)
        try:
            result = shell.run_cell(cell, store_history=False)
        finally:
            shell.ast_transformers.remove(transformer)
            ns.pop(marker_name, None)
            ns.pop(result_name, None)
        if isinstance(getattr(result, "error_in_exec", None), KeyboardInterrupt):
            # IPython showed the interrupt of the cell and went on; a measurement must stop (the panel's Stop)
            raise KeyboardInterrupt
        return result

    # -- %%argus_setup ----------------------------------------------------------------------------------------
    @cell_magic
    def argus_setup(self, line: str, cell: str) -> None:
        """Run the cell and remember it as a setup cell for replays: ``%%argus_setup [NAME]``.

        A cell that raises is not remembered (an earlier version of the same name is forgotten) and the magic raises
        too, so that *Run All* stops here instead of running cells that need what this one failed to build.
        """
        name = line.strip() or "cell-" + hashlib.sha1(cell.encode(), usedforsecurity=False).hexdigest()[:8]
        shell: Any = self.shell
        result = shell.run_cell(cell, store_history=False)
        if result.success:
            self.setup_cells[name] = cell
            return
        self.setup_cells.pop(name, None)
        error = result.error_in_exec or result.error_before_exec
        what = type(error).__name__ if error is not None else "an error"
        msg = (
            f"the setup cell {name!r} raised {what} (its traceback is above), so replays will not run it: fix the "
            "cell and run it again before the cells that use what it defines"
        )
        raise UsageError(msg)

    # -- %%argus / %argus -------------------------------------------------------------------------------------
    @line_cell_magic
    def argus(self, line: str, cell: str | None = None) -> Any:
        """``%%argus [options]`` measures the cell; ``%argus help`` lists the line commands."""
        try:
            if line.split(maxsplit=1)[:1] == ["sql"]:
                return self._sql(line.split(maxsplit=1)[1] if len(line.split(maxsplit=1)) > 1 else "", cell)
            if cell is not None:
                return self._measure(line, cell)
            return self._command(line)
        except ArgusError as exc:
            raise UsageError(str(exc)) from None

    def _store(self, given: str | None) -> str | None:
        return checked_store(given) if given else self.store_path

    def _place(self) -> CellPlace:
        """Where the running cell is: its notebook, cell id and prompt number."""
        shell: Any = self.shell
        return CellPlace(notebook_path(shell), _cell_id(shell), prompt_number(shell))

    def _setup_sources(self, mode: str) -> tuple[tuple[str, ...], list[str]]:
        """The setup sources of a replay (``--setup marked|history|none``) and the notes about those left out."""
        shell: Any = self.shell
        if mode == "none":
            return (), []
        if mode == "marked":
            raw = list(self.setup_cells.values())
        else:
            history = list(shell.history_manager.input_hist_raw)[1:-1]  # raw inputs, without this cell
            raw = [h for h in history if h.strip()]
        setup = setup_cells(raw, shell.transform_cell)
        return setup.sources, list(setup.notes)

    def _measure(self, line: str, cell: str) -> Any:
        from argus_lab.app.cells import CellRequest, SetupCells, implicit_hint, origin_cells, plan_cell
        from argus_lab.app.measure import run_plan

        args = measure_parser().parse_args(split_line(line, "%%argus"))
        _check_out_name(args.out, self.shell)
        store = self._store(args.store)
        shell: Any = self.shell
        source = shell.transform_cell(cell)
        place = self._place()  # before this cell's body is cached under the same number
        code = compile(source, shell.compile.cache(source, place.number), "exec")
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

        setup = SetupCells(*map(tuple, self._setup_sources(args.setup)))
        self._origin_cells = origin_cells(args.origin or place.origin())
        planned = plan_cell(CellRequest.of(args), source, run_cell_once, place, setup, store)
        progress = None if args.quiet else throttled(NotebookLine())
        for note in planned.notes:
            print(f"argus: {note}")
        measured = run_plan(
            planned.plan, planned.workload, store, on_error=args.on_error, progress=progress, isolate=args.isolate
        )
        report = measured.report
        self.last_report = report
        hint = implicit_hint(report, planned.implicit)
        if hint:
            print(f"argus: {hint}")
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
            "sql": lambda rest: self._sql(" ".join(rest), None),  # reached by the line's raw text (argus())
        }
        if cmd not in handlers:
            msg = f"unknown %argus command {cmd!r}; use one of: {', '.join(handlers)} (`%argus help` explains them)"
            raise UsageError(msg)
        return handlers[cmd](rest)

    def _sql(self, rest: str, cell: str | None) -> Any:
        """``%argus sql [--store P] QUERY`` or ``%%argus sql [--store P]`` with the query as the cell."""
        from argus_lab.app.query import sql

        store = None
        words = rest.split(maxsplit=2)
        if words[:1] == ["--store"]:
            if len(words) < 2:
                raise UsageError("%argus sql --store needs a store path, e.g. %argus sql --store argus.duckdb SELECT 1")
            store, rest = words[1], words[2] if len(words) > 2 else ""
        query = (cell if cell is not None else rest).strip()
        if cell is not None and rest.strip():
            raise UsageError("%%argus sql takes the query from the cell; put only --store PATH on the magic's line")
        if not query:
            raise UsageError(
                "%argus sql needs a query, e.g. %argus sql SELECT path, count(*) FROM region_instances GROUP BY path"
            )
        return sql(query, store=self._store(store))

    def _doctor(self, rest: list[str]) -> None:
        from argus_lab.app.doctor import diagnose, render, to_json

        p = _parser("%argus doctor", "Check what this machine can measure: each line ok or the fix.")
        p.add_argument("--json", action="store_true", help="print the checks as JSON")
        args = p.parse_args(rest)
        checks = diagnose()
        print(to_json(checks) if args.json else render(checks))

    def _plan(self, rest: list[str]) -> None:
        from argus_lab.app.measure import plan_from_options

        p = _parser("%argus plan", "Show the plan of a request without running it.")
        _request_options(p)
        args = p.parse_args(rest)
        the_plan = plan_from_options(args)
        self.last_plan = the_plan
        print(the_plan.explain())

    def _report_for(self, args: Any) -> Report | None:
        """The report a line command shows (:func:`argus_lab.app.runs.kernel_report`); None, with a note, when this
        kernel measured nothing yet."""
        from argus_lab.app.runs import kernel_report
        from argus_lab.run.runtime import session_id

        last = None if args.store else self.last_report
        latest = bool(getattr(args, "latest", False))
        shown = kernel_report(self._store(args.store), args.run, latest=latest, last=last, session=session_id())
        if shown.note:
            print(f"argus: {shown.note}")
        return shown.report

    def _show(self, rest: list[str]) -> Any:
        from argus_lab.views.bundle import ReportView

        p = _parser("%argus show", "Display the last report (or given runs of a store).")
        p.add_argument("--store", default=None)
        p.add_argument("--run", action="append", default=None, metavar="RUN_ID")
        p.add_argument("--latest", action="store_true", help="the newest request in the store, of any session")
        p.add_argument("--title", default="")
        args = p.parse_args(rest)
        report = self._report_for(args)
        return None if report is None else ReportView(report, title=args.title)

    def _runs(self, rest: list[str]) -> Any:
        from argus_lab.report import evidence
        from argus_lab.store import Store
        from argus_lab.views.tables import TableView

        p = _parser("%argus runs", "List the runs of the store, newest first.")
        p.add_argument("--store", default=None)
        p.add_argument("-n", "--limit", type=int, default=20)
        args = p.parse_args(rest)
        return TableView(evidence.run_list(Store(self._store(args.store)), args.limit), "runs (newest first)")

    def _export(self, rest: list[str]) -> None:
        from argus_lab.app.exporting import export

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
        report = self._report_for(args)
        if report is None:
            return
        result = export(report.store, args.path, fmt=args.format, run_ids=list(report.run_ids), title=args.title)
        print(result.text())

    def _import(self, rest: list[str]) -> Any:
        from argus_lab.app.importing import import_trace
        from argus_lab.report import Report
        from argus_lab.report.text import escape

        p = _parser("%argus import", "Import a torch.profiler trace, an Nsight Systems report or an .ncu-rep as a run.")
        p.add_argument("path")
        p.add_argument("--format", choices=("kineto", "nsys", "ncu"), default=None)
        p.add_argument("--store", default=None)
        p.add_argument("--domain", default=None)
        args = p.parse_args(rest)
        options = {"domain": args.domain} if args.domain else {}
        result = import_trace(args.path, self._store(args.store), fmt=args.format, **options)
        print("\n".join(escape(line) for line in result.text().split("\n")))  # a file's name may hold ESC sequences
        self.last_report = Report(str(result.store_path), [result.run_id])
        return None

    def _set_store(self, rest: list[str]) -> None:
        if not rest:
            where = kernel_store(self.shell).value
            print(f"argus: measurements of this kernel go to {where['store']} (from {where['source']})")
            return
        if len(rest) != 1:
            msg = "usage: %argus store PATH (e.g. `%argus store argus.duckdb`)"
            raise UsageError(msg)
        self.store_path = checked_store(rest[0])
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


class _CellNamer:
    """Names a kernel's temporary cell files (``/tmp/ipykernel_1/4062557006.py``) as ``cell [5] of nb.ipynb``."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def __call__(self, file: str) -> str | None:
        number = getattr(getattr(self.shell, "compile", None), "_filename_map", {}).get(file)
        return cell_label(number, notebook_path(self.shell)) if number is not None else None


def load(ipython: InteractiveShell) -> None:
    """Register the magics and make plotly figures survive nbconvert (its ``notebook`` renderer)."""
    from argus_lab.faces.gpu_cells import GpuCellMagics

    ipython.register_magics(ArgusMagics)
    ipython.register_magics(GpuCellMagics)
    from argus_lab.views import init_notebook

    init_notebook()


__all__ = ["ArgusMagics", "kernel_store", "load", "measure_line", "measure_parser"]
