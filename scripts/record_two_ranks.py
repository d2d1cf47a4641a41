#!/usr/bin/env python3
"""Record two-rank CUPTI evidence for the CI fixtures (issue 17): NCCL kernels of both ranks, clock offsets, skew.

    python scripts/record_two_ranks.py OUT          # two GPUs (nvidia-h200-x2), about 1.5 minutes
    python scripts/record_two_ranks.py OUT --cpu    # dry run: gloo on the CPU, host signals only

Writes ``OUT/two_ranks/``:

* ``nccl_overlap_2r.duckdb``: ``examples/gpu/nccl_overlap.py`` under ``torchrun --nproc-per-node 2``, three
  requests: the default alternation (``serial`` and ``overlapped`` steps), then ``train`` mode serial and
  ``train`` mode overlapped (the before/after of the notebook);
* ``ddp_train_2r.duckdb``: ``examples/gpu/ddp_train.py --model s`` (DDP, 25 MB buckets), two requests: DDP's own
  bucketed all-reduces (launched from autograd's thread, attributed temporally to ``step/backward``), and the same
  with ``--bucket-regions`` (each bucket's all-reduce inside a ``bucket_allreduce`` region: exact);
* ``runs.json``: per request its label, run ids, the exact command and environment; ``*.txt``: the reports as
  ``argus-lab show`` prints them; ``logs/``.

The stores are rewritten with 16 KiB DuckDB blocks (``argus_lab.store.compact``) so that they stay small.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pgo_study as ps

from argus_lab.store import Store
from argus_lab.store.compact import compact

SIGNALS = "gpu.time,gpu.span,gpu.kernels,comm.time,comm.kernels,comm.overlap,comm.exposed,host.wall"

# store -> [(label, script, script args, extra environment, repetitions)]
RECORDINGS: dict[str, list[tuple[str, str, list[str], dict[str, str], int]]] = {
    "nccl_overlap_2r": [
        ("alternating", "nccl_overlap.py", [], {}, 3),
        ("train-serial", "nccl_overlap.py", [], {"NCCL_OVERLAP_MODE": "train", "NCCL_OVERLAP_STEP": "serial"}, 3),
        ("train-overlapped", "nccl_overlap.py", [], {"NCCL_OVERLAP_MODE": "train"}, 3),
    ],
    "ddp_train_2r": [
        ("ddp-temporal", "ddp_train.py", ["--model", "s", "--steps", "2"], {}, 2),
        ("ddp-bucket-regions", "ddp_train.py", ["--model", "s", "--steps", "2", "--bucket-regions"], {}, 2),
    ],
}
CPU_ARGS = {"nccl_overlap.py": None, "ddp_train.py": ["--device", "cpu", "--model", "tiny"]}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--cpu", action="store_true", help="dry run: gloo on the CPU (nccl_overlap.py is left out)")
    p.add_argument("--timeout", type=float, default=150.0)
    opts = p.parse_args(argv)
    out = Path(opts.out).resolve() / "two_ranks"
    (out / "logs").mkdir(parents=True, exist_ok=True)
    index: dict[str, Any] = {"signals": SIGNALS, "launcher": " ".join(ps.launcher()), "stores": {}}
    bad = 0
    for name, recs in RECORDINGS.items():
        store = out / f"{name}.duckdb"
        entries = []
        for label, script, args, env, reps in recs:
            if opts.cpu:
                cpu = CPU_ARGS[script]
                if cpu is None:
                    print(f"--- {name}/{label}: left out of the CPU dry run (needs NCCL)", flush=True)
                    continue
                args = [a for a in args if a not in ("--model", "s")] + cpu
            before = {r[0] for r in Store(store).rows("SELECT run_id FROM runs")} if store.exists() else set()
            cmd = [
                sys.executable, "-m", "argus_lab.faces.cli", "run", str(ps.EXAMPLES / script), "--launch",
                " ".join(ps.launcher()), "--signals", SIGNALS, "--repeat", str(reps), "--warmup", "1",
                "--store", str(store), "--", *args,
            ]  # fmt: skip
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                res = ps.run_logged(cmd, out / "logs" / f"{name}-{label}.log", opts.timeout)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            rows = Store(store).rows("SELECT run_id, status FROM runs") if store.exists() else []
            runs = {r[0]: r[1] for r in rows if r[0] not in before}
            bad += res["exit"] != 0 or not runs
            entries.append({"label": label, "env": {"NCCL_NVLS_ENABLE": "0", **env}, "runs": runs, **res})
            print(f"--- {name}/{label}: exit {res['exit']} in {res['seconds']} s, runs {runs}", flush=True)
        if not store.exists():
            continue
        show = ps.run_logged(
            [sys.executable, "-m", "argus_lab.faces.cli", "show", "--all", "--store", str(store), "--provenance"],
            out / f"{name}.txt",
            opts.timeout,
        )
        size = compact(store, drop_shards=True)
        index["stores"][name] = {"requests": entries, "show": show["log"], **asdict(size)}
        print(f"=== {store}: {size.bytes / 2**20:.2f} MiB (from {size.bytes_before / 2**20:.2f} MiB)", flush=True)
        if size.bytes > 5 * 2**20:
            print(f"    over 5 MiB: record fewer steps for {name}", flush=True)
    (out / "runs.json").write_text(json.dumps(index, indent=1))
    print(f"wrote {out / 'runs.json'}")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
