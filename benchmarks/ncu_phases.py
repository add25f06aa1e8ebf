"""Where ``%%gpuprofile --ncu`` spends its wall time, phase by phase, in a fresh IPython kernel.

    python benchmarks/ncu_phases.py [--ncu PATH] [--json PATH] [--ncu-args ARGS ...]
                                    [--early on,off] [--repeat N] [--top N]

The cell is a ``torch.nn.TransformerEncoderLayer`` forward (d_model 1024, 16 heads, batch 8 x 512
tokens, fp32), the held-out case of the ``--ncu`` target (<= 12 s on an H100). Each variant runs in
a fresh process holding a real IPython shell with gpumagic loaded; per variant: the magic's wall
time, the phases the run recorded (``NcuCapture.phases``: shipping, the first pass's remainder,
child start, torch import, CUDA init, inputs, warm-up, capture with ncu's replay passes, tool
stop/flush, reading, cleanup), the launches profiled and the kernel names, so that variants can be compared
side by side in one run. ``--early on,off`` compares the profiled process started beside the first
pass (``ncu_early_start``, the default) with one started after it, interleaved ``--repeat`` times.
``--top N`` passes the magic's ``--top``: below the cell's 4 kernel names (``--top 2``) the first
pass ranks more names than asked for, and the held process is stopped unused (its stop path).
Needs a GPU and ncu; without them it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from nsys_phases import fresh_kernel  # the same fresh-kernel run (this folder is on the path)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SETUP = """
import torch
layer = torch.nn.TransformerEncoderLayer(1024, 16, batch_first=True).cuda().eval()
src = torch.randn(8, 512, 1024, device="cuda")
"""

CELL = """with torch.no_grad():
    out = layer(src)
"""

CHILD = r"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
ncu, profiles, setup, cell, flags, early = json.loads(sys.argv[1])
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpumagic")
ip.run_line_magic("config", f"GpuMagics.profile_dir = {profiles!r}")
ip.run_line_magic("config", "GpuMagics.history = ''")
ip.run_line_magic("config", f"GpuMagics.ncu_early_start = {early}")
if ncu:
    ip.run_line_magic("config", f"GpuMagics.ncu_path = {ncu!r}")
ip.run_cell(setup).raise_error()
t = time.perf_counter()
ip.run_cell_magic("gpuprofile", f"--ncu -o rep {flags}", cell)
wall = time.perf_counter() - t
rep = ip.user_ns["rep"]
import torch
launches = rep.to_dataframe()
print("RESULT " + json.dumps(dict(
    wall_s=wall, phases=dict(rep.phases), launches=int(len(launches)),
    kernels=sorted({str(k) for k in launches["Kernel"]}),
    notes=list(rep.notes), device=torch.cuda.get_device_name())))
"""


def run(ncu: str | None, flags: str, early: bool) -> dict[str, Any]:
    return fresh_kernel(
        CHILD, lambda profiles: [ncu, profiles, SETUP, CELL, flags, early], timeout=600
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ncu", default=None, help="the ncu binary (default: gpumagic's search)")
    ap.add_argument("--json", default=None, help="where the figures go (default: results/)")
    ap.add_argument(
        "--ncu-args",
        action="append",
        default=None,
        help="a variant's extra ncu arguments; repeat for several (default: one, none)",
    )
    ap.add_argument("--early", default="on", help="on, off or on,off (compared side by side)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each variant, interleaved")
    ap.add_argument("--top", type=int, default=None, help="the magic's --top (default: its own)")
    args = ap.parse_args()
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if not gpu:
        print("No CUDA GPU here: --ncu needs one; nothing measured.")
        return
    variants = [
        (extra, early)
        for extra in (args.ncu_args or [""])
        for early in [e.strip() == "on" for e in args.early.split(",")]
    ]
    results = []
    for _ in range(args.repeat):
        for extra, early in variants:
            flags = (f'--ncu-args "{extra}"' if extra else "") + (
                f" --top {args.top}" if args.top is not None else ""
            )
            r = run(args.ncu, flags, early)
            r["ncu_args"], r["early_start"] = extra, early
            results.append(r)
            if "error" in r:
                print(f"[{extra or 'default'}] ERROR\n{r['error']}")
    ok = [r for r in results if "error" not in r]
    if not ok:
        raise SystemExit(1)
    names: list[str] = []
    for r in ok:
        names += [n for n in r["phases"] if n not in names]
    heads = [(r["ncu_args"] or "default") + ("" if r["early_start"] else " late") for r in ok]
    width = max(12, *(len(h) + 2 for h in heads))
    print(f"\n{ok[0]['device']}")
    print(f"{'phase (s)':18}" + "".join(f"{h:>{width}}" for h in heads))
    for name in names:
        vals = [r["phases"].get(name) for r in ok]
        print(
            f"{name:18}"
            + "".join(f"{v:{width}.3f}" if v is not None else " " * width for v in vals)
        )
    print(f"{'wall (magic)':18}" + "".join(f"{r['wall_s']:{width}.3f}" for r in ok))
    print(f"{'launches':18}" + "".join(f"{r['launches']!s:>{width}}" for r in ok))
    tag = ok[0]["device"].split()[1].lower() if " " in ok[0]["device"] else "gpu"
    path = args.json or os.path.join(ROOT, "benchmarks", "results", f"ncu_phases_{tag}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"device": ok[0]["device"], "top": args.top, "runs": results}, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
