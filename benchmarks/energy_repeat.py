"""Energy per call from ``%gputime``: how repeatable it is across fresh processes, and what
``--compare`` says of fp32 against bf16.

    python benchmarks/energy_repeat.py [--runs 5] [--size 8192] [--json PATH]

Each run is a fresh Python with an IPython shell and gpumagic loaded, timing one N^3 bf16 matmul
with ``%gputime -o`` (``--energy``: ``%gputime --energy -o``): its J/call, mean power, the interval of the power and the SM clock. The spread
of J/call across runs (max/min - 1 and each run's distance from the median) is the repeatability;
target within +-5%. Then one process runs ``%%gputime --compare`` of the same matmul in fp32
(TF32 off) and bf16, interleaved (``--energy``: then blocks of each statement's own calls for its
J/call), and prints its table (time and J/call side by side).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ONE = r"""
import json, sys, torch
from IPython.core.interactiveshell import InteractiveShell
n, energy = int(sys.argv[1]), sys.argv[2] == "1"
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpumagic")
ip.run_line_magic("config", "GpuMagics.history = ''")
ip.user_ns["a"] = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
r = ip.run_line_magic("gputime", ("-o -q --energy " if energy else "-o -q ") + "a @ a")
e = r.energy
print("RESULT " + json.dumps(dict(line=r.line(), median=r.median, joules=e.joules_per_call if e else None,
    watts=e.watts if e else None, rel_ci=e.rel_ci if e else None, blocks=e.blocks if e else None,
    seconds=e.seconds if e else None, counter=r.energy_counter, device=r.device)))
"""

COMPARE = r"""
import sys, torch
from IPython.core.interactiveshell import InteractiveShell
n, energy = int(sys.argv[1]), sys.argv[2] == "1"
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpumagic")
ip.run_line_magic("config", "GpuMagics.history = ''")
setup = f"import torch; A = torch.randn({n}, {n}, device='cuda'); Ah = A.bfloat16(); torch.backends.cuda.matmul.allow_tf32 = False"
c = ip.run_cell_magic("gputime", ("--compare --energy -o " if energy else "--compare -o ") + setup, "A @ A  # fp32\nAh @ Ah  # bf16")
print(c)
df = c.to_dataframe()
print("RESULT " + df[["label", "median", "energy_per_call", "power_w"]].to_json(orient="records"))
"""


def _run(code: str, *args: str) -> tuple[dict | list | None, str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), done.stdout
    return None, done.stdout + done.stderr[-3000:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--json", default=None)
    ap.add_argument("--energy", action="store_true", help="%%gputime --energy (steady, then +-5%%)")
    args = ap.parse_args()
    runs = []
    for i in range(args.runs):
        got, text = _run(ONE, str(args.size), "1" if args.energy else "0")
        if got is None:
            print(f"run {i}: ERROR\n{text}")
            continue
        runs.append(got)
        print(f"run {i}: {got['line']}")
    joules = [r["joules"] for r in runs if r["joules"]]
    summary = {}
    if joules:
        med = statistics.median(joules)
        summary = dict(
            median_j=med,
            spread=max(joules) / min(joules) - 1,
            worst=max(abs(j / med - 1) for j in joules),
        )
        print(
            f"\n{args.size}^3 bf16 matmul, {len(joules)} fresh processes: J/call median {med:.4g}, max/min - 1 = {summary['spread']:.1%}, worst from the median {summary['worst']:.1%} (target <= 5%)"
        )
        print(f"{'run':>4}{'J/call':>10}{'W':>8}{'+-':>8}{'median ms':>11}")
        for i, r in enumerate(runs):
            ci = f"{r['rel_ci']:.1%}" if r["rel_ci"] is not None else "-"
            print(f"{i:4}{r['joules']:10.4g}{r['watts']:8.0f}{ci:>8}{r['median'] * 1e3:11.3f}")
    compared, text = _run(COMPARE, str(args.size), "1" if args.energy else "0")
    print("\n" + "\n".join(x for x in text.splitlines() if not x.startswith("RESULT ")))
    device = runs[0]["device"] if runs else "unknown"
    path = args.json or os.path.join(
        HERE,
        "results",
        f"energy_repeat_{device.split()[1].lower() if ' ' in device else 'gpu'}.json",
    )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(
            dict(device=device, size=args.size, runs=runs, summary=summary, compare=compared),
            f,
            indent=1,
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
