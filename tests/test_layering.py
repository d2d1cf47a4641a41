"""The layout rule (docs/architecture.md, "Import order"): a module imports only from its own stage or from stages
below it, and no set of modules imports itself round.

Stages, bottom first: ``errors``/``units``/``config`` -> ``model/`` -> ``store/`` -> markers (``regions``,
``device``) -> ``plan/`` -> ``run/`` -> ``backends/`` and ``importers/`` -> ``join/`` -> ``report/`` -> ``views/``
-> ``app/`` -> ``optimize/``, ``faces/`` and the package's ``__init__`` (the public API, loaded lazily).

Every import is read from the source with :mod:`ast`: at module level, inside functions and under
``TYPE_CHECKING`` alike for the direction; for cycles every import but those under ``TYPE_CHECKING`` (they never
run).  Code below reaches code above only by a *name held in a declaration*, loaded with :mod:`importlib`: a
backend's implementation (``BackendInfo.module``), the Report's renderer (``report.report.RENDERER``), the store's
recovery (``store.db.RECOVERY_MODULE``) and the live pass counter's worker (``plan.live_passes.WORKER_MODULE``).
The checker itself is tested on synthetic sources: it must report an upward import and a cycle, a function-level
one included.

SQL that reads the store lives in ``report/`` (and in the store, the model, the join and the importers, which
maintain or write it): no other module holds a string, docstrings aside, that begins with ``SELECT``, ``WITH`` or
``COPY``, nor a piece of a statement built elsewhere (`` FROM runs``, `` WHERE run_id = ?``, ``ORDER BY``; an
example of a user's own query, ``%argus sql SELECT ... FROM ...``, aside) (:func:`sql_reads`, tested on synthetic
sources too).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import argus_lab

PACKAGE = Path(argus_lab.__file__).resolve().parent
ROOT = PACKAGE.parent

STAGES: tuple[tuple[str, ...], ...] = (
    ("argus_lab.errors", "argus_lab.units", "argus_lab.config"),
    ("argus_lab.model",),
    ("argus_lab.store",),
    ("argus_lab.regions", "argus_lab.device"),
    ("argus_lab.plan",),
    ("argus_lab.run",),
    ("argus_lab.backends", "argus_lab.importers"),
    ("argus_lab.join",),
    ("argus_lab.report",),
    ("argus_lab.views",),
    ("argus_lab.app",),
    ("argus_lab.optimize", "argus_lab.faces", "argus_lab"),
)
"""Each stage's module prefixes, bottom first (stage 0, ``errors``/``units``/``config``, is usable by all)."""

LAZY_NAMES = {
    "region": "argus_lab.regions",
    "Region": "argus_lab.regions",
    "current_path": "argus_lab.regions",
    "DEFAULT_SIGNALS": "argus_lab.plan",
    "measure": "argus_lab.app.measure",
    "open_store": "argus_lab.app.measure",
    "import_trace": "argus_lab.app.importing",
    "sql": "argus_lab.app.query",
    "optimize": "argus_lab.optimize",
    "Report": "argus_lab.report",
}
"""What ``from argus_lab import NAME`` imports for the names the package exports lazily."""

Import = tuple[int, str, bool]
"""(line, imported module, whether the import is under ``TYPE_CHECKING``)."""


def stage_of(module: str) -> int | None:
    """The stage index of a module of argus_lab (``None`` when it belongs to no stage)."""
    for index, prefixes in enumerate(STAGES):
        for prefix in prefixes:
            if prefix == "argus_lab" and module != "argus_lab":
                continue
            if module == prefix or module.startswith(prefix + "."):
                return index
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The ids of every node inside an ``if TYPE_CHECKING:`` body."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                inside.update(id(n) for n in ast.walk(stmt))
    return inside


def imports_in(source: str, package: str, known: Iterable[str]) -> list[Import]:
    """Every argus_lab module imported by ``source``, a module of ``package``, wherever the import statement is;
    ``known``: the module names that exist (``from pkg import name`` imports the module ``pkg.name`` when there is
    one, else ``pkg`` itself)."""
    modules = set(known)
    tree = ast.parse(source)
    guarded = _type_checking_nodes(tree)
    out: list[Import] = []
    for node in ast.walk(tree):
        checking = id(node) in guarded
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, checking) for a in node.names if a.name.split(".")[0] == "argus_lab"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            if origin.split(".")[0] != "argus_lab":
                continue
            for alias in node.names:
                sub = f"{origin}.{alias.name}"
                if origin == "argus_lab" and alias.name in LAZY_NAMES:
                    out.append((node.lineno, LAZY_NAMES[alias.name], checking))
                else:
                    out.append((node.lineno, sub if sub in modules else origin, checking))
    return out


def package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def sources() -> dict[str, str]:
    """Every module of argus_lab: name -> source."""
    paths = sorted(p for p in PACKAGE.rglob("*.py") if "labextension" not in p.parts)
    return {module_name(p): p.read_text() for p in paths}


def packages() -> set[str]:
    return {module_name(p) for p in PACKAGE.rglob("__init__.py") if "labextension" not in p.parts}


def upward_imports(modules: Mapping[str, str], pkgs: set[str]) -> list[str]:
    """``module:line imports target`` for every import of a module from a stage above its own."""
    offenders = []
    for name, source in modules.items():
        own = stage_of(name)
        if own is None:
            continue
        for line, target, _ in imports_in(source, package_of(name, name in pkgs), modules):
            theirs = stage_of(target)
            if theirs is not None and theirs > own:
                offenders.append(f"{name}:{line} imports {target} (stage {theirs} > {own})")
    return offenders


def import_cycles(modules: Mapping[str, str], pkgs: set[str]) -> list[list[str]]:
    """The sets of modules that import each other round (strongly connected components of more than one module,
    or a module importing itself), counting function-level imports, not those under ``TYPE_CHECKING``."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, source in modules.items():
        for _, target, checking in imports_in(source, package_of(name, name in pkgs), modules):
            if not checking and target in graph:
                graph[name].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for start in sorted(graph):  # Tarjan's algorithm, iterative (no recursion limit on a deep chain)
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    cycles.append(sorted(component))
    return cycles


SQL_HOMES = ("argus_lab.report", "argus_lab.store", "argus_lab.model", "argus_lab.join", "argus_lab.importers")
"""The packages whose modules may hold SQL that reads the store: ``report/`` (every read query), the store and the
model (schema, migrations, views), the join and the importers (they write the store from what they read of it)."""

SQL_READ = re.compile(r"[\s(]*(SELECT|WITH|COPY)\b")
"""A statement that reads: a string that begins (after blanks and opening parentheses) with the SQL keyword
``SELECT``, ``WITH`` or ``COPY``, written in capitals as every query of argus_lab is."""


SQL_FRAGMENT = re.compile(
    r"\b(?:FROM|JOIN)\s+[a-z_(]|\bWHERE\s|\b(?:GROUP|ORDER)\s+BY\b|\bHAVING\s|\bINSERT\s+INTO\b|\bDELETE\s+FROM\b"
)
"""A piece of a statement anywhere in a string (an f-string by its literal parts together): a capital keyword of a
clause followed by what it reads (``FROM runs``, ``JOIN (``, ``WHERE``, ``GROUP BY``, ``ORDER BY``, ``HAVING``), as
in SQL put together from parts; English prose does not write these in capitals."""

USER_QUERY = re.compile(r"(?:%%?argus sql|argus_lab\.sql\()[^`]*")
"""An example of the user's own query in a message (``%argus sql SELECT path FROM region_instances``, up to the
closing backtick): SQL the user types, not a read of argus_lab's, so it is left out before looking for pieces."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module, its classes and functions."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        if isinstance(node, ast.Module | ast.ClassDef):  # attribute docstrings: a string after an assignment
            for before, after in zip(node.body, node.body[1:], strict=False):
                assigned = isinstance(before, ast.Assign | ast.AnnAssign)
                if assigned and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                    out.add(id(after.value))
    return out


def sql_reads(modules: Mapping[str, str]) -> list[str]:
    """``module:line`` and the statement's start for every string outside :data:`SQL_HOMES` that reads the store
    (:data:`SQL_READ`, an f-string by its first literal part) or holds a piece of a statement (:data:`SQL_FRAGMENT`,
    an f-string by its literal parts, each value standing as ``{}``; :data:`USER_QUERY` examples aside), docstrings
    aside."""
    found = []
    for name, source in modules.items():
        if name.startswith(tuple(f"{home}." for home in SQL_HOMES)) or name in SQL_HOMES:
            continue
        tree = ast.parse(source)
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                parts = [
                    v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}" for v in node.values
                ]
                text = parts[0] if parts and parts[0] != "{}" else ""
                whole = "".join(parts)
                skip.update(id(v) for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                text = whole = node.value
            else:
                continue
            piece = SQL_FRAGMENT.search(USER_QUERY.sub("", whole))
            if SQL_READ.match(text):
                found.append(f"{name}:{node.lineno} {text.strip()[:60]!r}")
            elif piece:
                found.append(f"{name}:{node.lineno} {piece.string[piece.start() :].strip()[:60]!r}")
    return found


# -- the rule on argus_lab ---------------------------------------------------------------------------------------
def test_every_module_belongs_to_a_stage() -> None:
    lost = [name for name in sources() if stage_of(name) is None]
    assert not lost, f"modules outside every stage (put each in a stage's folder, see docs/architecture.md): {lost}"


def test_no_module_imports_from_a_stage_above_it() -> None:
    offenders = upward_imports(sources(), packages())
    assert not offenders, "imports from a stage above:\n" + "\n".join(offenders)


def test_no_import_cycle_even_through_function_level_imports() -> None:
    cycles = import_cycles(sources(), packages())
    assert not cycles, "modules that import each other round (break the cycle, see docs/architecture.md):\n" + (
        "\n".join(" <-> ".join(c) for c in cycles)
    )


def test_the_store_imports_only_the_model() -> None:
    """The store sits on the evidence model alone: no run, plan, join or application code (recovery is handed to it
    by the application, by name)."""
    modules, pkgs = sources(), packages()
    wrong = sorted(
        f"{name} imports {target}"
        for name, source in modules.items()
        if name.startswith("argus_lab.store")
        for _, target, _ in imports_in(source, package_of(name, name in pkgs), modules)
        if not target.startswith(("argus_lab.store", "argus_lab.model", "argus_lab.errors", "argus_lab.config"))
    )
    assert not wrong, wrong


def test_sql_that_reads_the_store_lives_in_report_or_below() -> None:
    """docs/architecture.md ("Each rule lives in one place"): the faces, the views, the application and the
    optimiser read the store through functions of ``report/`` (or the store's own), never with SQL of their own."""
    offenders = sql_reads(sources())
    assert not offenders, "SQL reading the store outside " + ", ".join(SQL_HOMES) + ":\n" + "\n".join(offenders)


def test_the_stages_are_the_ones_the_architecture_page_names() -> None:
    """docs/architecture.md states the same order as this test (its "Import order" block lists the stages)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    block = page.split("## Import order", 1)[1].split("```")[1]
    named = [line.split()[0] for line in block.strip().splitlines() if line.strip() and line[0].isdigit()]
    assert named == [str(i) for i in range(len(STAGES))], block
    for prefixes in STAGES:
        for prefix in prefixes:
            short = prefix.removeprefix("argus_lab.") if prefix != "argus_lab" else "__init__"
            assert short in block, f"{short} is missing from the import order of docs/architecture.md"


# -- the checker itself, on SYNTHETIC sources ------------------------------------------------------------------
def test_the_checker_sees_function_level_relative_and_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from argus_lab.views import bundle\n"
        "def f():\n    from argus_lab.report import Report\n    from ..store import db\n    return Report, db\n"
    )
    known = {"argus_lab.views.bundle", "argus_lab.store.db", "argus_lab.report"}
    found = {(m, checking) for _, m, checking in imports_in(source, "argus_lab.run", known)}
    assert found == {("argus_lab.views.bundle", True), ("argus_lab.report", False), ("argus_lab.store.db", False)}


def test_the_checker_fails_on_a_synthetic_upward_import() -> None:
    modules = {
        "argus_lab.store.db": "def reopen():\n    from argus_lab.app import recovery\n    return recovery\n",
        "argus_lab.app.recovery": "from argus_lab.store.db import Store\n",
    }
    assert upward_imports(modules, set()) == ["argus_lab.store.db:2 imports argus_lab.app.recovery (stage 10 > 2)"]


def test_the_checker_fails_on_a_synthetic_cycle_and_ignores_type_checking_ones() -> None:
    cycle = {
        "argus_lab.plan.passes": "from argus_lab.plan.explain import why\n",
        "argus_lab.plan.explain": "def why():\n    from argus_lab.plan import planner\n",
        "argus_lab.plan.planner": "import argus_lab.plan.passes\n",
        "argus_lab.plan.model": "from argus_lab.plan.passes import x\n",
    }
    assert import_cycles(cycle, set()) == [
        ["argus_lab.plan.explain", "argus_lab.plan.passes", "argus_lab.plan.planner"]
    ]
    assert upward_imports(cycle, set()) == []  # one stage: only the cycle test can see it
    typing_only = {
        "argus_lab.views.bundle": "from argus_lab.views.html import page\n",
        "argus_lab.views.html": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from argus_lab.views import bundle\n"
        ),
    }
    assert import_cycles(typing_only, set()) == []
    assert import_cycles({"argus_lab.join.a": "def f():\n    import argus_lab.join.a\n"}, set()) == [
        ["argus_lab.join.a"]
    ]


def test_the_sql_checker_finds_queries_and_pieces_of_queries_outside_report_and_spares_the_rest() -> None:
    modules = {
        "argus_lab.views.a": (
            '"""Run argus_lab.sql(\'SELECT 1\') in a notebook."""\n'
            'X = 1\n"""SELECT path FROM region_instances: an attribute docstring."""\n'
            'def f(con, t):\n    """SELECT nothing."""\n'
            '    con.execute("SELECT count(*) FROM runs")\n'
            '    con.execute(f"""\n  WITH a AS (SELECT 1) SELECT * FROM {t}""")\n'
            "    con.execute(f\"COPY ({t}) TO 'x'\")\n"
            '    return "select a run, e.g. %argus sql SELECT 1"\n'
        ),
        "argus_lab.report.b": 'Q = "SELECT run_id FROM runs"\n',
        "argus_lab.faces.c": 'Q = ("SELECT run_id "\n     "FROM runs")\n',
        "argus_lab.app.d": (
            "def f(con, run, cols):\n"
            "    where = f\" WHERE run_id = '{run}'\"\n"
            '    return con.execute(f"{cols} FROM region_instances" + where + " ORDER BY t0")\n'
            "def g():\n"
            '    """SELECT path FROM region_instances WHERE x: a docstring."""\n'
            '    a = "e.g. `%argus sql SELECT path FROM region_instances WHERE rank = 0` in a cell"\n'
            '    b = "From the runs where it failed, ORDER matters; group by hand"\n'
            "    return a, b\n"
        ),
        "argus_lab.report.e": 'W = " WHERE run_id = ?"\n',
    }
    assert sql_reads(modules) == [
        "argus_lab.views.a:6 'SELECT count(*) FROM runs'",
        "argus_lab.views.a:7 'WITH a AS (SELECT 1) SELECT * FROM'",
        "argus_lab.views.a:9 'COPY ('",
        "argus_lab.faces.c:1 'SELECT run_id FROM runs'",
        "argus_lab.app.d:2 \"WHERE run_id = '{}'\"",
        "argus_lab.app.d:3 'ORDER BY t0'",
        "argus_lab.app.d:3 'FROM region_instances'",
    ]


# -- the public names and the measured process ---------------------------------------------------------------------
def test_the_optimisation_loop_is_its_own_package_on_top() -> None:
    """``argus_lab.optimize`` is the package ``argus_lab.optimize``, exported lazily like ``measure``, above the
    application it measures through; the device peaks are in one module of it."""
    assert argus_lab.optimize.__name__ == LAZY_NAMES["optimize"]
    top = len(STAGES) - 1
    assert stage_of("argus_lab.optimize") == stage_of("argus_lab.optimize.session") == top
    assert argus_lab.optimize.DeviceSpec.__module__ == "argus_lab.optimize.specs"


def test_measured_process_imports_stay_light() -> None:
    """A measured child imports the markers and the child runner: no polars, plotly, ipywidgets or DuckDB."""
    code = (
        "import sys, argus_lab.regions, argus_lab.run.child\n"
        "heavy = sorted(m for m in ('polars', 'plotly', 'ipywidgets', 'duckdb', 'IPython') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, timeout=60
    ).stdout.strip()
    assert out == "", f"importing argus_lab.regions and argus_lab.run.child loaded {out}"
