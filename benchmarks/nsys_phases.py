"""Where ``%%gpuprofile --nsys`` spends its wall time, phase by phase, in a fresh IPython kernel:
the first ``--nsys`` cell and the next one, with the warm child (the default) and without it.

    python benchmarks/nsys_phases.py [--nsys PATH] [--json PATH] [--repeat N] [--modes one-shot,warm]
        [--nsys-trace cuda,nvtx] [--nsys-args "..."] [--cells N] [--settle S] [--nproc N]
        [--variants now,sampling,late-cuda,before] [--workload five-ops|train] [--compare-torch]

Each run is a fresh process holding a real IPython shell with gpumagic loaded: a setup cell, then
the held-out-style five-op cell (a GEMM, an embedding bag, a convolution, a top-k and a host sync)
under ``%%gpuprofile --nsys`` twice (its inputs changed in between, as a user tuning it would), in
one of two modes: ``warm`` (``GpuMagics.nsys_warm_child = True``, the default: the second cell
reuses the child) and ``one-shot`` (a new ``nsys profile`` per cell). Per cell: the wall time of
the magic (capture, export, reading and the report), the phases the run recorded
(``trace.meta["phases"]``), and whether the kernel table (names and counts) equals the one-shot
run's of the same cell. Targets on an H100: first <= 8 s, second <= 4 s, tables equal.

``--workload train``: a training step of a Llama-style model whose classes are defined in the
notebook (``train_step.py``: tied head, fused AdamW, bf16 autocast, two micro-steps) in place of
the five ops. ``--modes in-place``: the kernel itself runs under ``nsys launch`` as the spec of
``python -m gpumagic kernel install --nsys`` starts it, and each cell is profiled in place (no
child; target: every cell <= 4 s). ``--compare-torch``: after the ``--nsys`` cells, the same cell
under ``%%gpuprofile`` (torch.profiler) in the same kernel, its kernel multiset and its optimizer
kernels set beside each nsys cell's (not in-place: nsys holds CUPTI there).

``--variants`` runs each mode as gpumagic runs it now and as it ran before each of the first cell's
savings, interleaved, in fresh kernels: ``sampling`` turns nsys' CPU sampling and context switches
back on (``--nsys-args "--sample=process-tree --cpuctxsw=process-tree"``, nsys' defaults),
``late-cuda`` starts CUDA after the torch import (``GPUMAGIC_CUDA_EARLY=0``), ``before`` both;
``counters`` samples the GPU metrics as ``--counters`` does (its cost).

Without a GPU or a real nsys it runs too, with the stand-in ``tests/fake_nsys/nsys`` on the CPU,
and says so: the figures then time gpumagic's own orchestration (Python start, torch import, the
hand-over), not Nsight Systems.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from train_step import STEP as TRAIN_CELL  # this folder is on the path
from train_step import notebook, optimizer_kernels

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FAKE = os.path.join(ROOT, "tests", "fake_nsys", "nsys")

SETUP = """
import torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
a = torch.randn(2048, 2048, device=dev); b = torch.randn(2048, 2048, device=dev)
bag = torch.nn.EmbeddingBag(50000, 256, mode="sum").to(dev)
idx = torch.randint(0, 50000, (8192,), device=dev); offsets = torch.arange(0, 8192, 64, device=dev)
conv = torch.nn.Conv2d(64, 128, 3, padding=1).to(dev); x = torch.randn(16, 64, 56, 56, device=dev)
s = torch.randn(64, 32768, device=dev)
"""

#: The five-op cell: GEMM, embedding bag, conv, top-k, a host sync.
CELL = """c = a @ b
e = bag(idx, offsets)
y = conv(x)
v, i = torch.topk(s, 64, dim=1)
total = float(y.sum().item()) + float(c[0, 0]) + float(e[0, 0]) + float(v[0, 0])
"""

#: ``--nproc N``: a DDP step on every rank (the rank runner gives ``device``, ``local_rank`` and
#: ``dist``), its model built by ``--setup`` in each rank; one line, as the magic's option takes it.
RANKS_SETUP = (
    "import torch; from torch.nn.parallel import DistributedDataParallel as DDP; "
    "model = DDP(torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), "
    "torch.nn.Linear(1024, 256)).to(device), device_ids=[local_rank]); "
    "x = torch.randn(256, 1024, device=device); buf = torch.ones(1 << 18, device=device)"
)
RANKS_CELL = "model(x).square().mean().backward()\ndist.all_reduce(buf)\n"

#: The phases in the order they happen (a warm child's first cell has them all but "hand-over").
ORDER = (
    "shipping",
    "child start",
    "torch import",
    "CUDA init",
    "hand-over",
    "inputs",
    "setup",
    "warm-up",
    "tool start",
    "capture",
    "tool stop/flush",
    "export",
    "reading",
    "report",
)

CHILD = r"""
import json, os, sys, time
from IPython.core.interactiveshell import InteractiveShell
nsys, mode, profiles, setup, cell, flags, trace, cells, settle, compare = json.loads(sys.argv[1])
if settle is not None:
    import gpumagic.capture.nsys.warm as warm
    warm._settle = settle  # the wait after `nsys start` under test
t0 = time.perf_counter()
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpumagic")
ip.run_line_magic("config", f"GpuMagics.nsys_path = {nsys!r}")
ip.run_line_magic("config", f"GpuMagics.profile_dir = {profiles!r}")
ip.run_line_magic("config", f"GpuMagics.nsys_warm_child = {mode == 'warm'}")
ip.run_line_magic("config", "GpuMagics.history = ''")
if trace:
    ip.run_line_magic("config", f"GpuMagics.nsys_trace = {trace!r}")
ip.run_cell(setup).raise_error()
rows = []
for n in range(1, cells + 1):
    if n > 1 and "a" in ip.user_ns:  # new inputs, as a user tuning the cell would
        ip.run_cell("a = torch.randn_like(a); x = torch.randn_like(x)").raise_error()
    t = time.perf_counter()
    ip.run_cell_magic("gpuprofile", f"--nsys -w 1 -n 1 --no-timeline -o rep{n} {flags}", cell)
    wall = time.perf_counter() - t
    rep = ip.user_ns[f"rep{n}"]
    k = rep.trace.kernels
    rows.append(dict(
        cell=n, wall_s=wall, phases=dict(rep.trace.meta.get("phases") or {}),
        kernels={str(name): int(c) for name, c in k["name"].value_counts().items()},
        reused=any(x.startswith("Warm child reused") for x in rep.notes),
        notes=[x for x in rep.notes if x.startswith("Warm child")],
        summary=rep.summary_line(),
    ))
torch_kernels = None
if compare:
    ip.run_cell_magic("gpuprofile", "-w 1 -n 1 --no-timeline -o tp", cell)
    k = ip.user_ns["tp"].trace.kernels
    torch_kernels = {str(name): int(c) for name, c in k["name"].value_counts().items()}
import torch
print("RESULT " + json.dumps(dict(rows=rows, cuda=torch.cuda.is_available(), torch_kernels=torch_kernels,
    device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    kernel_start_s=t0)))
"""


#: ``--variants``: (the ``--nsys-args`` added, the environment added) of each.
SAMPLING = "--sample=process-tree --cpuctxsw=process-tree"
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "now": ("", {}),
    "sampling": (SAMPLING, {}),
    "late-cuda": ("", {"GPUMAGIC_CUDA_EARLY": "0"}),
    "before": (SAMPLING, {"GPUMAGIC_CUDA_EARLY": "0"}),
    # what --counters asks of nsys (options.COUNTER_ARGS): the sampling's cost
    "counters": ("--gpu-metrics-devices=all --gpu-metrics-frequency=10000", {}),
}


def run(
    nsys: str,
    mode: str,
    flags: str = "",
    trace: str | None = None,
    cells: int = 2,
    settle: float | None = None,
    setup: str = SETUP,
    cell: str = CELL,
    env: dict[str, str] | None = None,
    compare: bool = False,
) -> dict[str, Any]:
    prefix: list[str] = []
    if mode == "in-place":  # the kernel as gpumagic's kernel spec starts it
        sys.path.insert(0, ROOT)
        from gpumagic.capture.nsys.inplace import NSYS_ENV, SESSION_ENV, TRACE_ENV

        session = f"gpumagic-bench-{os.getpid()}-{len(os.listdir(tempfile.gettempdir()))}"
        traced = trace or "cuda,nvtx"
        prefix = [nsys, "launch", f"--session-new={session}", "-t", traced]
        prefix += ["--cuda-graph-trace=node"] if "cuda" in traced else []
        env = dict(env or {}, **{SESSION_ENV: session, NSYS_ENV: nsys, TRACE_ENV: traced})
    return fresh_kernel(
        CHILD,
        lambda profiles: [nsys, mode, profiles, setup, cell, flags, trace, cells, settle, compare],
        env=env,
        prefix=prefix,
    )


def fresh_kernel(
    child: str,
    payload: Callable[[str], list[Any]],
    timeout: float = 900,
    env: dict[str, str] | None = None,
    prefix: list[str] | None = None,
) -> dict[str, Any]:
    """``child`` (Python source printing one ``RESULT {json}`` line) in a fresh process, given
    ``payload(profiles)`` as JSON, ``profiles`` a scratch folder removed afterwards, ``env`` added
    to its environment, ``prefix`` the command it runs under (``nsys launch ...``); its result, or
    ``{"error": ...}`` with the end of its output. The child runs as a module (``python -m``), as
    a kernel does."""
    profiles = tempfile.mkdtemp(prefix="gpumagic-bench-profiles-")
    with open(os.path.join(profiles, "gpumagic_bench_child.py"), "w", encoding="utf-8") as f:
        f.write(child)
    env = dict(
        os.environ,
        **(env or {}),
        PYTHONPATH=os.pathsep.join([ROOT, profiles, os.environ.get("PYTHONPATH", "")]),
    )
    try:
        proc = subprocess.run(
            [
                *(prefix or []),
                sys.executable,
                "-m",
                "gpumagic_bench_child",
                json.dumps(payload(profiles)),
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        shutil.rmtree(profiles, ignore_errors=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr or proc.stdout)[-3000:]}


def summarize(ok: list[dict[str, Any]], ranks: bool = False) -> None:
    """Per mode, variant and cell: the walls in order, their median, and how many met the target
    (first cell <= 8 s, later ones <= 4 s; ranks: each cell <= 15 s)."""
    groups: dict[tuple[str, str, int], list[float]] = {}
    for r in ok:
        for row in r["rows"]:
            key = (r["mode"], r.get("variant", "now"), row["cell"])
            groups.setdefault(key, []).append(row["wall_s"])
    print(f"\n{'mode':9}{'variant':11}{'cell':>5}{'median s':>10}{'<= target':>11}  walls")
    for (mode, variant, cell), walls in groups.items():
        target = 15.0 if ranks else 8.0 if cell == 1 else 4.0
        met = sum(w <= target for w in walls)
        print(
            f"{mode:9}{variant:11}{cell:5d}{statistics.median(walls):10.2f}{f'{met}/{len(walls)}':>11}  "
            + ", ".join(f"{x:.2f}" for x in walls)
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nsys", default=None, help="the nsys binary (default: PATH, else stand-in)")
    ap.add_argument("--repeat", type=int, default=1, help="fresh kernels per mode")
    ap.add_argument("--json", default=None, help="where the figures go (default: results/)")
    ap.add_argument("--modes", default="one-shot,warm", help="which modes run (comma-separated)")
    ap.add_argument("--nsys-trace", default=None, help="GpuMagics.nsys_trace (nsys -t)")
    ap.add_argument(
        "--nproc",
        type=int,
        default=None,
        help="ranks (--nproc N): a DDP step, one-shot runs only (--modes and --settle unused)",
    )
    ap.add_argument("--cells", type=int, default=2, help="--nsys cells per kernel (default 2)")
    ap.add_argument(
        "--settle", type=float, default=None, help="seconds waited after nsys start (warm)"
    )
    ap.add_argument("--nsys-args", default=None, help="the magic's --nsys-args")
    ap.add_argument("--workload", default="five-ops", choices=("five-ops", "train"))
    ap.add_argument(
        "--compare-torch", action="store_true", help="the cell under torch.profiler too"
    )
    ap.add_argument(
        "--variants",
        default="now",
        help=f"comma-separated, interleaved in each repeat: {', '.join(VARIANTS)} (module doc)",
    )
    args = ap.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}: choose from {', '.join(VARIANTS)}")
    nsys = args.nsys or shutil.which("nsys")
    stand_in = nsys is None
    if stand_in:
        nsys = FAKE
        os.environ.setdefault("FAKE_NSYS_MODE", "ok")
        print(
            "No nsys here: the stand-in tests/fake_nsys/nsys runs in its place. These figures "
            "time gpumagic's orchestration only (no Nsight Systems, and no GPU unless one is "
            "visible); its kernel tables are a committed fixture's, so 'equal' says nothing."
        )
    setup, cell, modes = SETUP, CELL, args.modes
    if args.workload == "train":
        setup, cell = notebook("step"), TRAIN_CELL
    ranks = ""
    if args.nproc:
        ranks = f' --nproc {args.nproc} --setup "{RANKS_SETUP}"'
        setup, cell, modes = "import torch", RANKS_CELL, "one-shot"  # ranks always start afresh
    results: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for mode in modes.split(","):
            for variant in variants:
                added, env = VARIANTS[variant]
                nsys_args = " ".join(a for a in (args.nsys_args, added) if a)
                flags = (f'--nsys-args "{nsys_args}"' if nsys_args else "") + ranks
                r = run(
                    nsys,
                    mode,
                    flags,
                    args.nsys_trace,
                    args.cells,
                    args.settle,
                    setup,
                    cell,
                    env,
                    args.compare_torch and mode != "in-place",
                )
                r.update(mode=mode, repeat=rep, variant=variant, flags=flags, env=env)
                results.append(r)
                if "error" in r:
                    print(f"{mode} {variant}: ERROR\n{r['error']}")
    ok = [r for r in results if "error" not in r]
    if not ok:
        raise SystemExit(1)
    device = ok[0]["device"]
    # every phase any run recorded, in the order they happen
    names = list(ORDER)
    for r in ok:
        for row in r["rows"]:
            names += [n for n in row["phases"] if n not in names]
    names = [n for n in names if any(n in row["phases"] for r in ok for row in r["rows"])]
    cols = [(r, row) for r in ok for row in r["rows"]]
    heads = [
        f"{r['mode'][:4]}{'' if r['variant'] == 'now' else ' ' + r['variant'][:6]}#{row['cell']}"
        for r, row in cols
    ]
    print(f"\n{device}; nsys: {nsys}{' (stand-in)' if stand_in else ''}")
    w = max(10, *(len(h) + 2 for h in heads))
    print(f"{'phase (s)':18}" + "".join(f"{h:>{w}}" for h in heads))
    for name in names:
        vals = [row["phases"].get(name) for _, row in cols]
        print(f"{name:18}" + "".join(f"{v:{w}.3f}" if v is not None else " " * w for v in vals))
    print(
        f"{'sum of phases':18}"
        + "".join(f"{sum(row['phases'].values()):{w}.3f}" for _, row in cols)
    )
    print(f"{'wall (magic)':18}" + "".join(f"{row['wall_s']:{w}.3f}" for _, row in cols))
    reference = {
        row["cell"]: row["kernels"] for r in ok if r["mode"] == "one-shot" for row in r["rows"]
    }
    equal = [row["kernels"] == reference.get(row["cell"]) if reference else None for _, row in cols]
    print(f"{'kernels = 1-shot':18}" + "".join(f"{e!s:>{w}}" for e in equal))
    print(f"{'child reused':18}" + "".join(f"{row['reused']!s:>{w}}" for _, row in cols))
    if args.compare_torch:
        same = [
            row["kernels"] == r["torch_kernels"] if r.get("torch_kernels") else None
            for r, row in cols
        ]
        print(f"{'kernels = torch':18}" + "".join(f"{e!s:>{w}}" for e in same))
        print(
            f"{'optimizer kernels':18}"
            + "".join(
                f"{sum(row['kernels'][n] for n in optimizer_kernels(list(row['kernels']))):>{w}}"
                for _, row in cols
            )
        )
        for r in ok:
            tk = r.get("torch_kernels")
            if tk:
                print(
                    f"torch.profiler ({r['mode']} #{r['repeat']}): {sum(tk.values())} kernels, "
                    f"{sum(tk[n] for n in optimizer_kernels(list(tk)))} optimizer kernels"
                )
                for _, row in [(r, row) for row in r["rows"]]:
                    diff = {
                        n: (row["kernels"].get(n, 0), tk.get(n, 0))
                        for n in set(row["kernels"]) | set(tk)
                        if row["kernels"].get(n, 0) != tk.get(n, 0)
                    }
                    if diff:
                        print(f"  cell {row['cell']} differs (nsys, torch): {diff}")
    summarize(ok, ranks=bool(args.nproc))
    tag = "stand-in" if stand_in else device.split()[1].lower() if " " in device else "gpu"
    path = args.json or os.path.join(ROOT, "benchmarks", "results", f"nsys_phases_{tag}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(
            {
                "device": device,
                "nsys": nsys,
                "stand_in": stand_in,
                "variants": variants,
                "nsys_trace": args.nsys_trace,
                "settle": args.settle,
                "runs": results,
            },
            f,
            indent=1,
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
