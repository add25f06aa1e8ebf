"""How fast a cell's names reach a tool's subprocess: a model defined in the notebook with its
AdamW state (~1.3 GB on the GPU), shipped the three ways side by side, interleaved.

    python benchmarks/shipping_speed.py [--repeat 3] [--json PATH]

Ways: ``ipc`` (gpumagic now: one serialization, CUDA storages by CUDA IPC handle, copied device to
device in the subprocess), ``host`` (the same with ``GPUMAGIC_SHIP_IPC=0``: CUDA storages through
the host) and ``before`` (the earlier path: ``torch.save`` of the tensors and modules, a separate
pickle of the rest, ``torch.load`` back onto the device; it cannot carry a notebook-defined class,
so its model is the same one with its class made importable). Each way: the parent's writing
(``ship``) and the subprocess' loading (``restore``, to its last device copy), the subprocess
already running with torch imported and CUDA started, as the warm child is. The subprocess checks
that the optimizer's parameters are the model's (True for ipc and host) and changes its weights;
the parent checks its own did not move. Target: ipc <= 1 s in all (H200).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

CHILD = r"""
import io, json, os, pickle, sys, time
import torch
torch.cuda.init(); torch.empty(1, device="cuda")
from gpumagic.capture.child.shipping import restore
for line in sys.stdin:
    way, directory = line.split()
    t = time.perf_counter()
    if way == "before":
        ns = {}
        with open(os.path.join(directory, "values.pkl"), "rb") as f:
            ns.update(pickle.load(f))
        with open(os.path.join(directory, "tensors.pt"), "rb") as f:
            ns.update(torch.load(io.BytesIO(f.read()), weights_only=False))
    else:
        ns = restore(directory)
    torch.cuda.synchronize()
    took = time.perf_counter() - t
    same = ns["opt"].param_groups[0]["params"][0] is ns["llm"].tok.weight
    with torch.no_grad():
        for p in ns["llm"].parameters():
            p.add_(1.0)
    torch.cuda.synchronize()
    print(json.dumps({"restore_s": took, "identity": same}), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch
    from train_step import STEP, notebook

    from gpumagic.capture.child.shipping import free_names, ship

    if not torch.cuda.is_available():
        raise SystemExit("needs CUDA: this measures CUDA tensors reaching a subprocess")
    ns: dict = {"__name__": "__main__"}
    exec(notebook("ship"), ns)  # noqa: S102 - the benchmark's own notebook cells
    exec(STEP, ns)  # noqa: S102 - one step: AdamW's state exists, as after training
    # the earlier path pickled classes by reference: its model's classes live in a module
    # both processes can import
    mods = tempfile.mkdtemp(prefix="gpumagic-ship-bench-mods-")
    with open(os.path.join(mods, "bench_notebook.py"), "w", encoding="utf-8") as f:
        f.write(notebook("ship") + STEP)
    sys.path.insert(0, mods)
    import bench_notebook

    old_ns = vars(bench_notebook)
    torch.cuda.synchronize()
    names = free_names(STEP)
    state_bytes = sum(
        t.numel() * t.element_size()
        for group in (
            list(ns["llm"].parameters()),
            *[list(s.values()) for s in ns["opt"].state.values()],
        )
        for t in group
        if torch.is_tensor(t)
    )
    before = [p.detach().clone() for p in ns["llm"].parameters()]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(
            os.environ, PYTHONPATH=os.pathsep.join([ROOT, mods, os.environ.get("PYTHONPATH", "")])
        ),
    )
    rows = []
    for rep in range(args.repeat):
        for way in ("ipc", "host", "before"):
            directory = tempfile.mkdtemp(prefix="gpumagic-ship-bench-")
            t = time.perf_counter()
            if way == "before":
                tensors = {
                    n: old_ns[n]
                    for n in names
                    if isinstance(old_ns.get(n), (torch.Tensor, torch.nn.Module))
                }
                rest = {
                    n: old_ns[n]
                    for n in names
                    if n in old_ns and n not in tensors and not isinstance(old_ns[n], type(os))
                }
                torch.save(tensors, os.path.join(directory, "tensors.pt"))
                with open(os.path.join(directory, "values.pkl"), "wb") as f:
                    pickle.dump(rest, f)
                note = ""
            else:
                os.environ["GPUMAGIC_SHIP_IPC"] = "1" if way == "ipc" else "0"
                manifest = ship(names, ns, directory)
                note = manifest.note()
            ship_s = time.perf_counter() - t
            child.stdin.write(f"{way} {directory}\n")
            child.stdin.flush()
            got = json.loads(child.stdout.readline())
            if way != "before":
                del manifest
            torch.cuda.ipc_collect()
            subprocess.run(["rm", "-rf", directory], check=False)
            row = dict(
                way=way,
                repeat=rep,
                ship_s=ship_s,
                **got,
                total_s=ship_s + got["restore_s"],
                note=note,
            )
            rows.append(row)
            print(
                f"{way:7} #{rep}  ship {ship_s:6.3f} s  restore {got['restore_s']:6.3f} s  total {row['total_s']:6.3f} s  identity {got['identity']}"
            )
    child.stdin.close()
    child.wait()
    unchanged = all(torch.equal(a, b) for a, b in zip(before, ns["llm"].parameters()))
    device = torch.cuda.get_device_name()
    print(
        f"\n{device}; model + AdamW state {state_bytes / 1e9:.2f} GB; the notebook's weights unchanged: {unchanged}"
    )
    print(f"{'way':8}{'ship s':>9}{'restore s':>11}{'total s':>9}  identity")
    summary = {}
    for way in ("ipc", "host", "before"):
        mine = [r for r in rows if r["way"] == way]
        med = {k: statistics.median(r[k] for r in mine) for k in ("ship_s", "restore_s", "total_s")}
        summary[way] = dict(med, identity=all(r["identity"] for r in mine))
        print(
            f"{way:8}{med['ship_s']:9.3f}{med['restore_s']:11.3f}{med['total_s']:9.3f}  {summary[way]['identity']}"
        )
    ratio = summary["before"]["total_s"] / summary["ipc"]["total_s"]
    print(f"ipc is {ratio:.1f}x the earlier path; {rows[0]['note']}")
    path = args.json or os.path.join(
        HERE, "results", f"shipping_speed_{device.split()[1].lower()}.json"
    )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(
            dict(
                device=device,
                state_bytes=state_bytes,
                unchanged=unchanged,
                rows=rows,
                summary=summary,
            ),
            f,
            indent=1,
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
