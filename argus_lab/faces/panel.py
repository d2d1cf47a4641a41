"""The signal panel: pick signals from the catalog, see conflicts and the number of runs, plan, run.

The catalog is listed per backend with each signal's unit, the backend's perturbation class and cost, and whether
this machine can collect it.  Every change re-plans (planning takes milliseconds) and shows the runs the plan
needs, the conflicts that split them, and the equivalent ``%%argus`` line, which can be pasted into a cell and
shared.  The Run button measures the panel's target (a callable) with a progress bar; the report appears below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from argus_lab.errors import ArgusError
from argus_lab.plan.backends import BACKENDS
from argus_lab.plan.catalog import CATALOG
from argus_lab.run.machine import gpu_available
from argus_lab.views.escape import html_text

if TYPE_CHECKING:
    from argus_lab.plan import Plan
    from argus_lab.report import Report
    from argus_lab.run.progress import Tick
    from argus_lab.run.workload import Workload

FAMILY_BACKENDS = {"ncu": "hw:", "pm": "pm:"}


class SignalPanel:
    """An ipywidgets panel over the signal catalog.

    Parameters
    ----------
    target
        What the Run button measures (a callable taking no arguments); ``None`` disables Run.
    store
        The evidence store (default ``$ARGUS_STORE`` or ``./argus.duckdb``).
    selected
        Signals ticked at start (default ``host.wall``).
    """

    def __init__(
        self, target: Any = None, store: str | None = None, selected: tuple[str, ...] = ("host.wall",)
    ) -> None:
        import ipywidgets as w

        self.target = target
        self.store = store
        self.report: Report | None = None
        self.here = gpu_available()
        self.boxes: dict[str, Any] = {}
        self.families: dict[str, Any] = {}
        sections = []
        for name, info in BACKENDS.items():
            collectable = self.here or not info.needs_gpu
            where = "collectable here" if collectable else "needs a GPU (not on this machine)"
            head = w.HTML(
                f"<b>{html_text(name)}</b> &middot; {html_text(info.perturbation)} &middot; cost x{info.cost_factor:g}"
                f" &middot; <span style='color:{'#2a7d2a' if collectable else '#a33'}'>{where}</span>"
                f"<br><small>{html_text(info.description)}</small>"
            )
            items: list[Any] = [head]
            for sig in (s for s in CATALOG.values() if s.backend == name):
                box = w.Checkbox(
                    value=sig.name in selected,
                    description=f"{sig.name} [{sig.unit}]",
                    description_allow_html=False,
                    tooltip=sig.description,
                    indent=False,
                    layout=w.Layout(width="auto"),
                )
                box.observe(self._changed, names="value")
                self.boxes[sig.name] = box
                items.append(box)
            if name in FAMILY_BACKENDS:
                prefix = FAMILY_BACKENDS[name]
                text = w.Text(
                    placeholder=f"{prefix}dram__bytes_read.sum, ... (comma-separated metrics)",
                    layout=w.Layout(width="95%"),
                )
                text.observe(self._changed, names="value")
                self.families[prefix] = text
                items.append(text)
            sections.append(w.VBox(items, layout=w.Layout(border="1px solid #ddd", padding="4px", margin="2px")))
        self.scope = w.Text(description="scope", placeholder="e.g. decode/**; instances=2:")
        self.repeat = w.BoundedIntText(value=3, min=1, max=10_000, description="repeat")
        self.warmup = w.BoundedIntText(value=1, min=0, max=10_000, description="warm-up")
        self.store_box = w.Text(value=store or "", description="store", placeholder="argus.duckdb")
        for wid in (self.scope, self.repeat, self.warmup, self.store_box):
            wid.observe(self._changed, names="value")
        self.status = w.HTML()
        self.line_box = w.Textarea(layout=w.Layout(width="95%", height="48px"), disabled=False)
        self.plan_button = w.Button(description="Plan", icon="list")
        self.run_button = w.Button(description="Run", button_style="primary", icon="play", disabled=target is None)
        self.plan_button.on_click(lambda _: self.show_plan())
        self.run_button.on_click(lambda _: self.run())
        self.progress = w.IntProgress(value=0, min=0, max=1, description="runs", layout=w.Layout(visibility="hidden"))
        self.progress_label = w.Label()
        self.output = w.Output()
        self.widget = w.VBox(
            [
                w.HTML("<b>argus: signals</b>" + ("" if target is not None else " (pass a callable to enable Run)")),
                w.GridBox(sections, layout=w.Layout(grid_template_columns="repeat(2, 50%)")),
                w.HBox([self.scope, self.repeat, self.warmup, self.store_box]),
                self.status,
                w.HTML("equivalent cell magic:"),
                self.line_box,
                w.HBox([self.plan_button, self.run_button, self.progress, self.progress_label]),
                self.output,
            ]
        )
        self._changed()

    # -- state ----------------------------------------------------------------------------------------------
    def selected(self) -> list[str]:
        """The signals picked (catalog boxes, then the metric families)."""
        out = [name for name, box in self.boxes.items() if box.value]
        for prefix, text in self.families.items():
            for part in str(text.value).split(","):
                metric = part.strip()
                if metric:
                    out.append(metric if metric.startswith(prefix) else prefix + metric)
        return out

    def plan(self, workload: Workload | None = None) -> Plan:
        """The plan of the current selection (raises :class:`~argus_lab.errors.ArgusError` when it is invalid); with
        ``workload``, the plan it will run, costed by its kernel census in the store (:func:`argus_lab.app.measure.
        plan`, as every face plans); without, the plan alone (the status line: no store read per keystroke)."""
        from argus_lab.app.measure import plan

        return plan(
            self.selected(),
            scope=self.scope.value,
            repeat=int(self.repeat.value),
            warmup=int(self.warmup.value),
            workload=workload,
            store=self.store_box.value or None,
        )

    def workload(self) -> Workload | None:
        """What Run measures: the target as a workload (``None``: the panel has no target)."""
        from argus_lab.run.workload import Workload

        return None if self.target is None else Workload.from_target(self.target)

    def line(self) -> str:
        """The ``%%argus`` line equivalent to the panel's settings."""
        from argus_lab.app.cell_code import measure_line

        return measure_line(
            ",".join(self.selected()),
            scope=self.scope.value,
            repeat=int(self.repeat.value),
            warmup=int(self.warmup.value),
            store=self.store_box.value or None,
        )

    def conflicts(self) -> list[str]:
        """Why the chosen backends cannot all share one run."""
        from argus_lab.app.signals import conflicts

        return conflicts(self.selected())

    def _changed(self, *_: Any) -> None:
        self.line_box.value = self.line()
        try:
            the_plan = self.plan()
        except ArgusError as exc:
            self.status.value = f"<span style='color:#a33'>{html_text(exc)}</span>"
            return
        from argus_lab.app.signals import needing_gpu

        missing = [] if self.here else needing_gpu(the_plan)
        parts = [f"<b>{len(self.selected())} signal(s) &rarr; {len(the_plan.runs)} run(s)</b>"]
        parts += [f"conflict: {html_text(c)}" for c in self.conflicts()]
        if missing:
            parts.append(
                "<span style='color:#a33'>need a GPU, so this machine will not collect them (the report says so): "
                f"{html_text(', '.join(missing))}</span>"
            )
        self.status.value = "<br>".join(parts)

    # -- actions --------------------------------------------------------------------------------------------
    def show_plan(self) -> None:
        """Print the plan's explanation below the panel."""
        self.output.clear_output()
        with self.output:
            try:
                print(self.plan(self.workload()).explain())
            except ArgusError as exc:
                print(f"argus: {exc}")

    def run(self) -> Report | None:
        """Plan and run a measurement of the target, with progress; display and return the report."""
        from IPython.display import display

        from argus_lab.app.measure import run_plan
        from argus_lab.run.workload import Workload
        from argus_lab.views.bundle import ReportView

        self.output.clear_output()
        if self.target is None:
            with self.output:
                print("argus: this panel has no target; create it with `%argus panel step` (a callable named step)")
            return None
        try:
            workload = Workload.from_target(self.target)
            the_plan = self.plan(workload)
        except ArgusError as exc:
            with self.output:
                print(f"argus: {exc}")
            return None
        before = [0]  # repetitions of the runs before the current one
        for r in the_plan.runs:
            before.append(before[-1] + r.repeat + r.warmup)
        self.progress.max = max(before[-1], 1)
        self.progress.value = 0
        self.progress.layout.visibility = "visible"
        self.run_button.disabled = True

        def progress(tick: Tick) -> None:
            done = tick.reps_total if tick.event == "end" else tick.reps_done
            self.progress.value = before[tick.run.index] + done
            self.progress_label.value = tick.text().removeprefix("argus: ")

        try:
            self.report = run_plan(the_plan, workload, self.store_box.value or None, progress=progress).report
        except ArgusError as exc:
            with self.output:
                print(f"argus: {exc}")
            return None
        finally:
            self.run_button.disabled = self.target is None
        with self.output:
            display(ReportView(self.report))  # type: ignore[no-untyped-call]
        return self.report

    # -- display --------------------------------------------------------------------------------------------
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        if isinstance(bundle, dict):
            bundle["text/plain"] = f"argus signal panel: {self.line()}"
        return bundle

    def __repr__(self) -> str:
        return f"<argus signal panel: {self.line()}>"


def signal_panel(target: Any = None, store: str | None = None) -> SignalPanel:
    """The signal-selection panel for measuring ``target`` (a callable taking no arguments)."""
    return SignalPanel(target=target, store=store)
