"""Record the traces that become tests/data/traces/ fixtures (H200 machine, within a hard time budget).

    scripts/gpu/record_traces.sh OUT            # the wrapper: 90 s hard limit, cleanup, size checks
    PYTHONPATH=/tmp/argus-site:$PWD /opt/torch/.venv/bin/python3 scripts/record_traces.py OUT --budget 75

Three recordings run side by side (one GPU, 16 cores), each with a timeout inside the budget:

* ``kineto_gpt2.json.gz``: torch.profiler (Kineto) trace of 3 training steps of a small GPT-2-shaped model
  (transformers, random weights, 2 layers, 256 wide) with ``record_function`` regions ``forward`` (one per block
  through module hooks), ``loss``, ``backward``, ``optimizer`` and ``tiny`` (a one-element add: a sub-microsecond
  kernel); ``prof.step()`` adds ``ProfilerStep#N``;
* ``ncu_regions.ncu-rep`` (+ ``ncu_regions.log``): ``ncu --nvtx --nvtx-include argus@step/`` with 4 metrics and
  no section over a Triton workload (3 x ``step{attn{2 kernels}; mlp{1}; torch_range{1}}``, argus regions with
  their instance index as NVTX payload, ``torch_range`` a ``torch.cuda.nvtx`` range in the default domain).
  Triton kernels keep the report small (the cubin of each profiled kernel's module is embedded: one torch or
  cuBLAS kernel weighs megabytes);
* ``nsys_regions.sqlite`` (+ ``nsys_regions.nsys-rep`` when < 8 MB, ``nsys.log``): the same workload under
  ``nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none``, then ``nsys export --type sqlite``.  When
  ``nsys profile`` leaves a ``.qdstrm`` and no report, ``QdstrmImporter`` is looked for next to the nsys binary
  and run; whatever fails is written to ``nsys.status.json`` with the tool's own error text.  A ``.qdstrm`` is
  never kept (deleted at the end) and the profile is stopped when it grows past 300 MB.

``summary.json`` says what each step did (exit status, seconds, error text, file sizes).  Every file is kept
under 8 MB (a larger SQLite export is gzipped; anything still larger is removed and named in the summary).
Nothing is imported here: the tests import the files on the CPU machine.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 8 * 2**20
QDSTRM_LIMIT = 300 * 2**20

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
import torch, triton, triton.language as tl
import argus_lab
from argus_lab.regions import Recorder

@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)

@triton.jit
def exp_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.exp(x) + tl.load(y_ptr + offs, mask=mask), mask=mask)

n = 1 << 16
x = torch.randn(n, device="cuda")
y, z = torch.empty_like(x), torch.empty_like(x)
grid = (triton.cdiv(n, 1024),)
scale_kernel[grid](x, y, n, 1.0, BLOCK=1024)  # compile outside the regions
exp_add_kernel[grid](x, y, z, n, BLOCK=1024)
torch.cuda.synchronize()
with Recorder("recorded"):  # instance indices as NVTX payloads (ARGUS_NVTX_PAYLOAD=1)
    for i in range(3):
        with argus_lab.region("step"):
            with argus_lab.region("attn"):
                scale_kernel[grid](x, y, n, 2.0, BLOCK=1024)
                exp_add_kernel[grid](x, y, z, n, BLOCK=1024)
            with argus_lab.region("mlp"):
                scale_kernel[grid](z, y, n, 0.5, BLOCK=1024)
            torch.cuda.nvtx.range_push("torch_range")
            exp_add_kernel[grid](y, x, z, n, BLOCK=1024)
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
print("workload ok")
"""


class Budget:
    """The wall-clock deadline every subprocess timeout is cut to."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self, cap: float) -> float:
        return max(1.0, min(cap, self.deadline - time.monotonic()))


def run(cmd: list[str], timeout: float, log: Path, env: dict[str, str], watch: Path | None = None) -> dict[str, object]:
    """Run ``cmd`` in its own process group with a timeout, output appended to ``log``.  ``watch``: a folder whose
    ``*.qdstrm`` files may not grow past :data:`QDSTRM_LIMIT` (the group is killed)."""
    t = time.monotonic()
    why = ""
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        except OSError as exc:
            out.write(f"cannot start {cmd[0]}: {exc}\n")
            return {"rc": -2, "s": 0.0, "error": f"cannot start {cmd[0]}: {exc}"}
        while proc.poll() is None:
            if time.monotonic() - t > timeout:
                why = f"timed out after {timeout:.0f} s"
            elif watch is not None:
                big = [p for p in watch.glob("*.qdstrm") if p.stat().st_size > QDSTRM_LIMIT]
                if big:
                    why = f"{big[0].name} grew past {QDSTRM_LIMIT >> 20} MB"
            if why:
                out.write(f"killed: {why}\n")
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
                break
            time.sleep(0.2)
    res: dict[str, object] = {"rc": proc.returncode, "s": round(time.monotonic() - t, 1)}
    if why:
        res["error"] = why
    elif proc.returncode != 0:
        res["error"] = tail(log)
    return res


def tail(log: Path, n: int = 8) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").strip().splitlines()[-n:])
    except OSError:
        return ""


def find_nsys() -> str | None:
    """nsys on PATH, in the CUDA toolkit, an Nsight Systems install, or inside Nsight Compute's install."""
    cands = [shutil.which("nsys"), "/usr/local/cuda/bin/nsys"]
    cands += sorted(glob.glob("/opt/nvidia/nsight-systems*/bin/nsys"), reverse=True)
    cands += sorted(glob.glob("/opt/nvidia/nsight-systems/*/bin/nsys"), reverse=True)
    cands += sorted(glob.glob("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"), reverse=True)
    cands += sorted(glob.glob("/usr/local/cuda*/nsight-compute*/host/target-linux-x64/nsys"), reverse=True)
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def find_importer(nsys: str) -> tuple[str | None, list[str]]:
    """QdstrmImporter next to ``nsys`` (same folder, sibling ``host-linux-x64``), else anywhere under the install."""
    here = Path(nsys).resolve().parent
    tried = [here, here.parent / "host-linux-x64", here.parent.parent / "host-linux-x64", here.parent]
    for d in tried:
        c = d / "QdstrmImporter"
        if c.is_file() and os.access(c, os.X_OK):
            return str(c), [str(d) for d in tried]
    top = here.parents[2] if len(here.parents) > 2 else here
    try:
        found = subprocess.run(
            ["find", str(top), "/opt/nvidia", "-name", "QdstrmImporter*", "-type", "f"],
            capture_output=True, text=True, timeout=8, check=False,
        )  # fmt: skip
        for line in found.stdout.splitlines():
            if line.strip() and os.access(line.strip(), os.X_OK):
                return line.strip(), [*map(str, tried), f"find {top} /opt/nvidia"]
    except subprocess.TimeoutExpired:
        pass
    return None, [*map(str, tried), f"find {top} /opt/nvidia"]


def kineto(out: Path, py: str, env: dict[str, str], budget: Budget, summary: dict[str, object]) -> None:
    raw = out / "kineto_gpt2.json"
    script = out / "kineto_workload.py"
    script.write_text(KINETO)
    res = run([py, str(script), str(raw)], budget.left(70), out / "kineto.log", env)
    if raw.exists():
        gz = out / "kineto_gpt2.json.gz"
        gz.write_bytes(gzip.compress(raw.read_bytes(), 6))
        res["raw_bytes"] = raw.stat().st_size
        raw.unlink()
    summary["kineto"] = res


def ncu(out: Path, py: str, wl: Path, env: dict[str, str], budget: Budget, summary: dict[str, object]) -> None:
    exe = "/usr/local/cuda/bin/ncu" if os.path.exists("/usr/local/cuda/bin/ncu") else (shutil.which("ncu") or "ncu")
    rep = out / "ncu_regions.ncu-rep"
    cmd = [
        exe, "--nvtx", "--nvtx-include", "argus@step/",
        "--metrics", "gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum,launch__grid_size",
        "--launch-count", "16", "--target-processes", "all", "--export", str(rep), "--force-overwrite", py, str(wl),
    ]  # fmt: skip
    res = run(cmd, budget.left(70), out / "ncu_regions.log", {**env, "ARGUS_NVTX_PAYLOAD": "1"})
    res["cmd"] = " ".join(cmd[1:-2]) + " python workload_regions.py"
    summary["ncu"] = res


def nsys(out: Path, py: str, wl: Path, env: dict[str, str], budget: Budget, summary: dict[str, object]) -> None:
    status: dict[str, object] = {}
    summary["nsys"] = status
    exe = find_nsys()
    log = out / "nsys.log"
    if exe is None:
        status["error"] = "nsys not found on PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-systems*, nsight-compute"
        return
    status["nsys"] = exe
    status["version"] = run([exe, "--version"], budget.left(10), log, env)
    base = out / "nsys_regions"
    cmd = [
        exe, "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-memory-usage=false",
        "--duration=40", "--force-overwrite=true", "-o", str(base), py, str(wl),
    ]  # fmt: skip
    status["profile"] = run(cmd, budget.left(60), log, env, watch=out)
    rep = base.with_suffix(".nsys-rep")
    qd = base.with_suffix(".qdstrm")
    if not rep.exists() and qd.exists():
        status["qdstrm_bytes"] = qd.stat().st_size
        importer, tried = find_importer(exe)
        status["importer_looked_in"] = tried
        if importer is None:
            status["error"] = (
                f"nsys profile left {qd.name} ({qd.stat().st_size} bytes) and no .nsys-rep, and no QdstrmImporter "
                f"was found (looked in {tried}); the nsys inside Nsight Compute's install cannot finish a report. "
                f"nsys said:\n{tail(log, 12)}"
            )
        else:
            status["importer"] = importer
            status["import"] = run([importer, "-i", str(qd)], budget.left(30), log, env)
            if status["import"]["rc"] != 0 and not rep.exists():  # type: ignore[index]
                status["import_long"] = run([importer, "--input-file", str(qd)], budget.left(30), log, env)
    if qd.exists():
        qd.unlink()
    if not rep.exists():
        status.setdefault("error", f"no .nsys-rep was written; last lines of nsys.log:\n{tail(log, 12)}")
        return
    sqlite = base.with_suffix(".sqlite")
    status["export"] = run(
        [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(sqlite), str(rep)],
        budget.left(30), log, env,
    )  # fmt: skip
    if not sqlite.exists():
        status["error"] = f"nsys export wrote no SQLite file; last lines of nsys.log:\n{tail(log, 12)}"


def bound_sizes(out: Path) -> dict[str, str]:
    """Every file < 8 MB: an SQLite export is gzipped; anything else too large is removed (and named)."""
    dropped: dict[str, str] = {}
    for p in sorted(out.iterdir()):
        if not p.is_file() or p.stat().st_size < MAX_BYTES:
            continue
        if p.suffix == ".sqlite":
            gz = p.with_name(p.name + ".gz")
            with p.open("rb") as src, gzip.open(gz, "wb", 6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            p.unlink()
            if gz.stat().st_size < MAX_BYTES:
                continue
            p = gz
        dropped[p.name] = f"removed: {p.stat().st_size} bytes >= 8 MB"
        p.unlink()
    for p in out.glob("*.qdstrm"):
        dropped[p.name] = f"removed: {p.stat().st_size} bytes (raw nsys stream)"
        p.unlink()
    return dropped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--budget", type=float, default=75.0, help="seconds for everything (default 75)")
    ap.add_argument("--only", default="kineto,ncu,nsys", help="steps to run (comma-separated)")
    args = ap.parse_args()
    budget = Budget(args.budget)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH", ""), str(ROOT)]))
    env.setdefault("TRITON_CACHE_DIR", str(Path("/tmp") / "argus-traces-triton"))
    wl = out / "workload_regions.py"
    wl.write_text(WORKLOAD)
    summary: dict[str, object] = {"python": py, "budget_s": args.budget}
    steps = {
        "kineto": lambda: kineto(out, py, env, budget, summary),
        "ncu": lambda: ncu(out, py, wl, env, budget, summary),
        "nsys": lambda: nsys(out, py, wl, env, budget, summary),
    }
    chosen = [s for s in args.only.split(",") if s]
    threads = [threading.Thread(target=steps[s], name=s, daemon=True) for s in chosen]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, budget.deadline - time.monotonic()) + 3)  # their subprocesses end by the deadline
    summary["unfinished"] = [t.name for t in threads if t.is_alive()]
    summary["dropped"] = bound_sizes(out)
    summary["files"] = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
