"""What the first run of a notebook's training step costs in a fresh process, and what changes it:
the warm-up phase of the first ``--nsys`` cell is that first run in the child.

    python benchmarks/first_step_probe.py [--nsys PATH] [--json PATH]

Each variant is a fresh Python that builds the ``train_step.py`` model (classes defined in the
script, as in a notebook) and times the step's first and second runs, synchronized:

* ``plain``: torch alone;
* ``early-cuda``: the driver started beside the torch import as the tools' children start it
  (``runner.start_cuda``);
* ``shipped``: the model and optimizer restored from a shipment (``shipping.restore``: CUDA IPC
  from this process) instead of built there;
* ``nsys-launch``: ``plain`` under ``nsys launch -t cuda,nvtx --cuda-graph-trace=node`` (nothing
  collected), as the warm child and the in-place kernel run;
* ``nsys-all``: ``shipped`` with ``early-cuda`` under ``nsys launch``: the warm child's way;
* ``+kernel``: one tiny torch kernel launched (and timed) before the inputs: what the first kernel
  of a fresh torch process costs on its own;
* ``-host``: shipped with ``GPUMAGIC_SHIP_IPC=0`` (CUDA storages through the host);
* ``+sleep5``: five seconds between the inputs and the first step (is the first step's cost work
  that finishes in the background?).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

CHILD = r"""
import json, os, sys, time
early, shipped = sys.argv[1] == "1", sys.argv[2]
t0 = time.perf_counter()
if early:
    from gpumagic.capture.phases import PhaseMarks
    from gpumagic.capture.child.runner import start_cuda
    start_cuda(PhaseMarks())
import torch
torch.empty(1, device="cuda")
t1 = time.perf_counter()
sys.path.insert(0, os.environ["PROBE_BENCH"])
from train_step import STEP, notebook
t = time.perf_counter()
if os.environ.get("PROBE_KERNEL") == "1":
    torch.ones(1, device="cuda").add_(1)
torch.cuda.synchronize()
first_kernel = time.perf_counter() - t
t2 = time.perf_counter()
ns = {"__name__": "__main__"}
if shipped != "-":
    from gpumagic.capture.child.shipping import restore
    ns.update(restore(shipped))
else:
    exec(notebook("step"), ns)
torch.cuda.synchronize()
inputs = time.perf_counter() - t2
time.sleep(float(os.environ.get("PROBE_SLEEP", "0")))
runs = []
for _ in range(3):
    t = time.perf_counter()
    exec(STEP, ns)
    torch.cuda.synchronize()
    runs.append(time.perf_counter() - t)
print("RESULT " + json.dumps(dict(start_s=t1 - t0, first_kernel_s=first_kernel, inputs_s=inputs, runs=runs)))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nsys", default=shutil.which("nsys"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch
    from train_step import STEP, notebook

    from gpumagic.capture.child.shipping import free_names, ship

    ns: dict = {"__name__": "__main__"}
    exec(notebook("step"), ns)  # noqa: S102 - the benchmark's notebook cells
    shipment = tempfile.mkdtemp(prefix="gpumagic-probe-")
    manifest = ship(free_names(STEP), ns, shipment)
    by_host = tempfile.mkdtemp(prefix="gpumagic-probe-host-")
    os.environ["GPUMAGIC_SHIP_IPC"] = "0"
    ship(free_names(STEP), ns, by_host)
    del os.environ["GPUMAGIC_SHIP_IPC"]
    launch = (
        [args.nsys, "launch", "-t", "cuda,nvtx", "--cuda-graph-trace=node"] if args.nsys else None
    )
    variants = {
        "plain": ([], "0", "-"),
        "early-cuda": ([], "1", "-"),
        "shipped": ([], "0", shipment),
        "nsys-launch": (launch, "0", "-"),
        "nsys-all": (launch, "1", shipment),
        "shipped+kernel": ([], "0", shipment),
        "shipped-host": ([], "0", by_host),
        "shipped+sleep5": ([], "0", shipment),
        "nsys-all-host": (launch, "1", by_host),
    }
    env = dict(
        os.environ,
        PROBE_BENCH=HERE,
        PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    results = {}
    script = os.path.join(shipment, "probe_child.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(CHILD)
    print(
        f"{'variant':16}{'start s':>9}{'1 kernel s':>11}{'inputs s':>10}{'1st step s':>12}{'2nd s':>8}{'3rd s':>8}"
    )
    for name, (prefix, early, shipped) in variants.items():
        if prefix is None:
            continue
        one = dict(env, PROBE_KERNEL="1" if name.endswith("+kernel") else "0")
        one["PROBE_SLEEP"] = "5" if name.endswith("+sleep5") else "0"
        proc = subprocess.run(
            [*prefix, sys.executable, script, early, shipped],
            env=one,
            capture_output=True,
            text=True,
            timeout=300,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{name:16} ERROR {proc.stderr[-500:]}")
            continue
        r = json.loads(line[7:])
        results[name] = r
        print(
            f"{name:16}{r['start_s']:9.2f}{r['first_kernel_s']:11.3f}{r['inputs_s']:10.2f}"
            + "".join(f"{x:{12 if i == 0 else 8}.3f}" for i, x in enumerate(r["runs"]))
        )
    del manifest
    shutil.rmtree(shipment, ignore_errors=True)
    shutil.rmtree(by_host, ignore_errors=True)
    device = torch.cuda.get_device_name()
    path = args.json or os.path.join(
        HERE, "results", f"first_step_probe_{device.split()[1].lower()}.json"
    )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dict(device=device, nsys=args.nsys, results=results), f, indent=1)
    print(f"{device}; wrote {path}")


if __name__ == "__main__":
    main()
