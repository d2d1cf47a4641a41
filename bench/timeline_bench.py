"""Timeline scale benchmark: build time and payload size of the timeline for up to a million kernels.

SYNTHETIC kernel records (not a measurement): ``N`` kernels on 4 streams of one device, back to back with
durations of 2-20 us, launched by region instances ``decode/layer/{attn,mlp}``.  Two paths are timed:

* ``timeline_data``: numpy columns -> the timeline dict (aggregation pyramid), then its JSON payload;
* ``store -> report bundle``: the kernels written to a DuckDB store, then the report bundle built from it
  (SQL reads + aggregation), and the standalone HTML written (plotly.js inlined once; gzipped with the data when
  the data is over 1 MB);
* with ``--chromium``: each page opened in headless chromium (``/usr/bin/chromium``, network blocked) ``--reps``
  times: ``load`` = navigation until the report is mounted (data inflated, plotly.js run), ``draw`` = a click on
  the Timeline tab until plotly has drawn it; medians, with the load average of the machine.

Usage: ``python bench/timeline_bench.py [N ...] [--chromium] [--reps 5]`` (default 10k 100k 1M); prints markdown.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from argus_lab.views.escape import json_for_script
from argus_lab.views.timeline import TimelineLimits, timeline_data

T0 = 1_764_000_000_000_000_000


def synthetic(n: int, seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Region instances and kernel columns of one run with ``n`` kernels (SYNTHETIC)."""
    rng = np.random.default_rng(seed)
    per_instance = 50
    n_inst = max(1, n // per_instance)
    dur = rng.integers(2_000, 20_000, n)
    gaps = rng.integers(200, 2_000, n)
    start = T0 + np.cumsum(dur + gaps) - dur
    end = start + dur
    inst_of = np.arange(n) // per_instance
    i_start = start[::per_instance][:n_inst] - 1_000
    i_end = np.append(start[per_instance::per_instance], end[-1])[:n_inst] + 500
    i_end[:-1] = np.minimum(i_end[:-1], i_start[1:])  # back to back: an instance ends where the next starts
    instances = {
        "instance_id": np.arange(1, n_inst + 1),
        "path": np.array(["decode/layer/attn" if i % 2 else "decode/layer/mlp" for i in range(n_inst)], dtype=object),
        "instance_index": np.arange(n_inst) // 2,
        "pid": np.full(n_inst, 1),
        "thread_id": np.full(n_inst, 7),
        "start_ns": i_start,
        "end_ns": i_end,
        "error": np.full(n_inst, "", dtype=object),
        "warmup": np.zeros(n_inst, dtype=bool),
    }
    names = np.array(["gemm_bf16_128x128", "flash_fwd", "rmsnorm", "rotary_emb"], dtype=object)
    kernels = {
        "instance_id": inst_of + 1,
        "name": names[rng.integers(0, 4, n)],
        "start_ns": start,
        "end_ns": end,
        "device_id": np.zeros(n, dtype=np.int64),
        "stream_id": rng.integers(0, 4, n) + 7,
    }
    return instances, kernels


def bench_memory(n: int) -> dict[str, float]:
    inst, kern = synthetic(n)
    t = time.perf_counter()
    tl = timeline_data("r-bench", inst, kern, TimelineLimits())
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    payload = json_for_script(tl)
    json_s = time.perf_counter() - t
    levels = tl["device"].get("levels", [])
    return {
        "kernels": n,
        "build_s": build_s,
        "json_s": json_s,
        "payload_mb": len(payload) / 1e6,
        "levels": len(levels),
        "finest_bin_us": (levels[-1]["bin_ns"] / 1e3) if levels else 0.0,
        "bins": sum(len(lv["bin"]) for lv in levels),
    }


FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip


def chromium_times(page: Path, reps: int) -> dict[str, float]:
    """Median load and timeline-draw seconds of ``page`` in headless chromium (a fresh tab each time)."""
    import os
    import statistics

    from playwright.sync_api import sync_playwright

    loads, draws, loadavg = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        for _ in range(reps):
            tab = browser.new_page(viewport={"width": 1300, "height": 900})
            tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
            loadavg.append(os.getloadavg()[0])
            t = time.perf_counter()
            tab.goto(page.as_uri(), wait_until="load", timeout=120_000)
            tab.get_by_role("button", name="Timeline").wait_for(timeout=120_000)
            loads.append(time.perf_counter() - t)
            t = time.perf_counter()
            tab.get_by_role("button", name="Timeline").click()
            tab.locator(".argus-timeline .main-svg").first.wait_for(timeout=120_000)
            tab.wait_for_function("() => document.querySelectorAll('.argus-timeline g.trace').length > 0")
            draws.append(time.perf_counter() - t)
            tab.close()
        browser.close()
    return {
        "load_s": statistics.median(loads),
        "draw_s": statistics.median(draws),
        "draw_min_s": min(draws),
        "draw_max_s": max(draws),
        "load_avg": statistics.median(loadavg),
    }


def bench_store(n: int, page_dir: Path | None = None, reps: int = 0) -> dict[str, float]:
    from argus_lab import join
    from argus_lab.report import Report
    from argus_lab.store import Store
    from argus_lab.views.bundle import EXPORT, build
    from argus_lab.views.html import standalone_html

    inst, kern = synthetic(n)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.duckdb")
        m = len(inst["instance_id"])
        store.write(
            {
                "requests": {"request_id": ["q"], "session_id": ["s"], "created_ns": [T0], "text": ["bench"]},
                "runs": {"run_id": ["r-bench"], "request_id": ["q"], "plan_index": [0], "status": ["ok"]},
                "region_instances": {
                    "run_id": ["r-bench"] * m,
                    **{k: v.tolist() for k, v in inst.items()},
                    "region_id": ["x"] * m,
                    "repetition": [0] * m,
                },
                "kernels": {"run_id": ["r-bench"] * n, **{k: v.tolist() for k, v in kern.items()}},
            }
        )
        join.attribute_request(store, ["r-bench"])  # where the runs end, as after a measurement (not timed)
        t = time.perf_counter()
        bundle = build(Report(store, ["r-bench"]), EXPORT)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        page = standalone_html(bundle)
        html_s = time.perf_counter() - t
        out: dict[str, float] = {
            "kernels": n,
            "bundle_s": build_s,
            "html_s": html_s,
            "html_mb": len(page.encode()) / 1e6,
        }
        if reps:
            folder = page_dir or Path(tmp)
            path = folder / f"timeline-{n}.html"
            path.write_text(page, encoding="utf-8")
            out.update(chromium_times(path, reps))
    return out


def main(argv: list[str]) -> None:
    reps = 0
    if "--chromium" in argv:
        argv = [a for a in argv if a != "--chromium"]
        reps = 5
    if "--reps" in argv:
        i = argv.index("--reps")
        reps = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    sizes = [int(float(a)) for a in argv] or [10_000, 100_000, 1_000_000]
    print("| kernels | timeline_data (s) | JSON (s) | payload (MB) | levels | finest bin (us) | bins |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        r = bench_memory(n)
        print(
            f"| {n:,} | {r['build_s']:.3f} | {r['json_s']:.3f} | {r['payload_mb']:.2f} | {r['levels']} "
            f"| {r['finest_bin_us']:.1f} | {r['bins']:,} |"
        )
    print()
    print("| kernels | store -> bundle (s) | standalone HTML (s) | HTML size (MB) | load (s) | draw (s) | load avg |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        r = bench_store(n, reps=reps)
        extra = (
            f"{r['load_s']:.2f} | {r['draw_s']:.2f} ({r['draw_min_s']:.2f}-{r['draw_max_s']:.2f}) | {r['load_avg']:.1f}"
            if reps
            else "- | - | -"
        )
        print(f"| {n:,} | {r['bundle_s']:.2f} | {r['html_s']:.2f} | {r['html_mb']:.2f} | {extra} |")
    print(json.dumps({"python": sys.version.split()[0]}))


if __name__ == "__main__":
    main(sys.argv[1:])
