"""Record the traces that become tests/data/traces/ fixtures (run on the H200 machine, about 2 minutes).

    PYTHONPATH=$PWD:/tmp/argus-site /opt/torch/.venv/bin/python3 scripts/record_traces.py OUT

Writes into OUT (each file < 5 MB):

* ``kineto_gpt2.json.gz``: torch.profiler (Kineto) trace of 3 training steps of a small GPT-2-shaped model
  (transformers, random weights, 2 layers, 256 wide) with ``record_function`` regions ``forward`` (one per block
  through module hooks), ``loss``, ``backward``, ``optimizer`` and ``tiny`` (a one-element add: a sub-microsecond
  kernel); ``prof.step()`` adds ``ProfilerStep#N``;
* ``ncu_regions.ncu-rep`` (+ ``.log``): ``ncu --nvtx --nvtx-include argus@step/ --launch-count 40`` with a small
  metric set on a torch workload with argus regions ``step/attn`` and ``step/mlp`` (NVTX payloads on) and a
  ``torch.cuda.nvtx`` range in the default domain;
* ``nsys_regions.nsys-rep`` + ``nsys_regions.sqlite`` when ``nsys`` exists (the same workload under
  ``nsys profile -t cuda,nvtx``), else ``nsys.missing`` saying where it was looked for;
* ``imported.duckdb`` + ``summary.json``: each recorded file imported with ``argus_lab.faces.importing``.

Every subprocess has a timeout; a step that fails is reported and the others go on.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KINETO = r"""
import sys, torch
from torch.profiler import profile, ProfilerActivity, record_function
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
cfg = GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=1000, n_positions=128)
model = GPT2LMHeadModel(cfg).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, 1000, (4, 64), device="cuda")
ranges = {}
def pre(mod, args, name):
    ranges[name] = record_function(name); ranges[name].__enter__()
def post(mod, args, out, name):
    ranges.pop(name).__exit__(None, None, None)
for i, block in enumerate(model.transformer.h):
    block.register_forward_pre_hook(lambda m, a, n=f"block{i}": pre(m, a, n))
    block.register_forward_hook(lambda m, a, o, n=f"block{i}": post(m, a, o, n))
tiny = torch.zeros(1, device="cuda")
def step():
    with record_function("forward"):
        out = model(ids, labels=ids)
    with record_function("loss"):
        loss = out.loss * 1.0
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer"):
        opt.step(); opt.zero_grad(set_to_none=True)
    with record_function("tiny"):
        tiny.add_(1)
for _ in range(2):
    step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(3):
        step()
        prof.step()
    torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
print("kineto ok")
"""

WORKLOAD = r"""
import torch
import argus_lab
from argus_lab.regions import Recorder
Recorder("recorded").activate()  # instance indices as NVTX payloads (with ARGUS_NVTX_PAYLOAD=1)
x = torch.randn(1 << 16, device="cuda")
for i in range(3):
    with argus_lab.region("step"):
        with argus_lab.region("attn"):
            y = torch.exp(x) + 1.0
            y = y * 0.5
        with argus_lab.region("mlp"):
            z = torch.relu(y) - x
        torch.cuda.nvtx.range_push("torch_range")
        w = z.sum()
        torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("workload ok", float(w))
"""


def run(cmd: list[str], timeout: float, log: Path, env: dict[str, str] | None = None) -> tuple[int, float]:
    """Run one command with a timeout, its output to ``log``; (exit status or -9 on timeout, seconds)."""
    t = time.monotonic()
    with log.open("w") as out:
        try:
            code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, env=env, check=False)
            rc = code.returncode
        except subprocess.TimeoutExpired:
            rc = -9
        except FileNotFoundError as exc:
            out.write(f"cannot start {cmd[0]}: {exc}\n")
            rc = -2
    return rc, time.monotonic() - t


def find_nsys() -> str | None:
    """nsys from PATH, the CUDA toolkit, /opt/nvidia/nsight-systems*, or anywhere (bounded find)."""
    cands = [shutil.which("nsys"), "/usr/local/cuda/bin/nsys"]
    cands += sorted(glob.glob("/opt/nvidia/nsight-systems*/bin/nsys"), reverse=True)
    cands += sorted(glob.glob("/opt/nvidia/nsight-systems/*/bin/nsys"), reverse=True)
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    try:
        found = subprocess.run(
            ["find", "/", "-xdev", "-name", "nsys", "-type", "f", "-perm", "-u+x"],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
        for line in found.stdout.splitlines():
            if line.strip():
                return line.strip()
    except subprocess.TimeoutExpired:
        pass
    return None


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/traces").resolve()
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    summary: dict[str, object] = {"python": py}
    # 1. Kineto
    raw = out / "kineto_gpt2.json"
    rc, secs = run([py, "-c", KINETO, str(raw)], 150, out / "kineto.log", env)
    if raw.exists():
        gz = out / "kineto_gpt2.json.gz"
        gz.write_bytes(gzip.compress(raw.read_bytes(), 9))
        raw.unlink()
    summary["kineto"] = {"rc": rc, "s": round(secs, 1)}
    # 2. ncu over the workload with argus regions
    wl = out / "workload_regions.py"
    wl.write_text(WORKLOAD)
    ncu = "/usr/local/cuda/bin/ncu" if os.path.exists("/usr/local/cuda/bin/ncu") else (shutil.which("ncu") or "ncu")
    rep = out / "ncu_regions.ncu-rep"
    ncu_cmd = [
        "env", "ARGUS_NVTX_PAYLOAD=1", ncu, "--nvtx", "--nvtx-include", "argus@step/",
        "--metrics", "gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum",
        "--launch-count", "40", "--target-processes", "all", "--export", str(rep), "--force-overwrite", py, str(wl),
    ]  # fmt: skip
    rc, secs = run(ncu_cmd, 150, out / "ncu_regions.log", env)
    summary["ncu"] = {"rc": rc, "s": round(secs, 1), "cmd": " ".join(ncu_cmd[2:])}
    # 3. nsys, when it exists
    nsys = find_nsys()
    if nsys is None:
        (out / "nsys.missing").write_text("nsys not found on PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-systems*\n")
        summary["nsys"] = "missing"
    else:
        base = out / "nsys_regions"
        rc, secs = run(
            [nsys, "profile", "-t", "cuda,nvtx", "-o", str(base), "--force-overwrite", "true", py, str(wl)],
            150, out / "nsys_profile.log", env,
        )  # fmt: skip
        rc2, secs2 = run(
            [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", f"{base}.sqlite",
             f"{base}.nsys-rep"],
            120, out / "nsys_export.log", env,
        )  # fmt: skip
        summary["nsys"] = {"path": nsys, "profile_rc": rc, "export_rc": rc2, "s": round(secs + secs2, 1)}
    # 4. import each recorded file
    store = out / "imported.duckdb"
    store.unlink(missing_ok=True)
    imports: dict[str, object] = {}
    for name in ("kineto_gpt2.json.gz", "ncu_regions.ncu-rep", "nsys_regions.sqlite"):
        if not (out / name).exists():
            continue
        code = (
            "import sys, json; from argus_lab.faces.importing import import_trace; "
            "r = import_trace(sys.argv[1], sys.argv[2]); print(r.text()); "
            "print(json.dumps({'run_id': r.run_id, 'counts': r.imported.counts, 'join': r.join.counts}))"
        )
        rc, secs = run([py, "-c", code, str(out / name), str(store)], 120, out / f"import_{name}.log", env)
        lines = (out / f"import_{name}.log").read_text().splitlines()
        imports[name] = {"rc": rc, "s": round(secs, 1), "result": lines[-1] if lines else ""}
    summary["imports"] = imports
    summary["files"] = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
