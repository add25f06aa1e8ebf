"""The profile's Rate column against ``%gputime`` for the same GEMM. Run on a GPU host:

    python benchmarks/rates_check.py [--size 8192] [--json PATH]

In one IPython shell: ``%gputime -o`` of an N^3 bf16 matmul (its counted FLOPs over its median
per-call time, and over its kernel time per call), then ``%%gpuprofile`` of ten of them: the GEMM
row's rate (the op's counted FLOPs over the kernel's own time). Side by side, with their ratio:
the kernel-time figures should agree within 2%; the per-call figure is lower by the gaps between
calls. Then ``gpumagic.replay`` of that row: its kernel time per call against the row's own
(target within 5%). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "rates_check.json"))
    args = ap.parse_args()
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    n = args.size
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.run_line_magic("config", "GpuMagics.history = ''")
    ip.run_cell(f"import torch\na = torch.randn({n}, {n}, device='cuda', dtype=torch.bfloat16)")
    r = ip.run_line_magic("gputime", "-o -q a @ a")
    flops = 2.0 * n**3
    per_call = flops / r.median
    per_kernel = flops / r.kernel_time if r.kernel_time else None
    with capture_output():
        ip.run_cell_magic(
            "gpuprofile", "-w 2 -o rep --no-timeline", "for _ in range(10):\n    c = a @ a"
        )
    rates = ip.user_ns["rep"].rates()
    gemm = rates.loc[rates["flop_rate"].idxmax()]
    row = float(gemm["flop_rate"])
    out = {
        "device": r.device,
        "size": n,
        "gputime_line": r.line(),
        "gputime_per_call_flop_rate": per_call,
        "gputime_kernel_flop_rate": per_kernel,
        "profile_row": {
            k: (v if isinstance(v, str) else float(v))
            for k, v in gemm.items()
            if v is not None and v == v
        },
        "ratio_kernel": row / per_kernel if per_kernel else None,
        "ratio_per_call": row / per_call,
    }
    print(r.line())
    print(f"{'':36}{'TFLOP/s':>10}{'row / it':>10}")
    print(f"{'%gputime, per call (median)':36}{per_call / 1e12:10.1f}{row / per_call:10.3f}")
    if per_kernel:
        print(
            f"{'%gputime, kernel time per call':36}{per_kernel / 1e12:10.1f}{row / per_kernel:10.3f}   (target 0.98-1.02)"
        )
    print(f"{'%%gpuprofile GEMM row':36}{row / 1e12:10.1f}   {gemm['Name'][:60]}")
    import gpumagic

    rep = ip.user_ns["rep"]
    again = gpumagic.replay(rep, str(gemm["Name"]))
    op = gpumagic.api.replay.replayed_op(rep.trace, str(gemm["Name"]))
    own = op["kernel_ns"] / 1e9
    replayed = again.kernel_time or again.median
    out["replay"] = {"line": again.line(), "row_s": own, "replayed_s": replayed}
    out["replay"]["ratio"] = replayed / own
    print(
        f"replay of the GEMM row: {replayed * 1e3:.3f} ms a call against the row's {own * 1e3:.3f} ms"
        f" (ratio {replayed / own:.3f}, target 0.95-1.05)"
    )
    print(again.line())
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, default=str)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
