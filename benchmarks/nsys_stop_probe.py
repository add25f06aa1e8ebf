"""What ``nsys stop`` costs by itself, outside gpumagic: one child under ``nsys launch``, then
``nsys start`` / ``nsys stop`` cycles with and without work and with nsys' start options varied.

    python benchmarks/nsys_stop_probe.py [--nsys PATH] [--cycles N] [--json PATH]

The child (plain Python and torch, no gpumagic) starts CUDA, then waits on a FIFO: each cycle
starts a collection, has the child run five 2048² GEMMs (or nothing: "idle"), and stops the
collection, timing ``nsys start`` and ``nsys stop`` and when the report file appeared. It answers
whether the ~3 s that a warm ``--nsys`` cell spends in "tool stop/flush" is gpumagic's (what it
collects, how it hands over) or nsys' own (the same for an empty collection). Needs nsys and a GPU.
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
import threading
import time
from typing import Any

CHILD = r"""
import os, sys, torch
torch.empty(1, device="cuda")
a = torch.randn(2048, 2048, device="cuda")
open(sys.argv[2] + ".ready", "w").write("1")
fd = os.open(sys.argv[1], os.O_RDWR)
buf = b""
while True:
    buf += os.read(fd, 100)
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        if line == b"exit":
            sys.exit(0)
        for _ in range(5 if line == b"work" else 0):
            b = a @ a
        torch.cuda.synchronize()
        open(sys.argv[2], "w").write(line.decode())
"""

#: (label, ``nsys start`` options, whether the child works in the collection)
VARIANTS: list[tuple[str, list[str], bool]] = [
    ("default", [], True),
    ("no sampling", ["--sample=none", "--cpuctxsw=none"], True),
    ("sampling", ["--sample=process-tree", "--cpuctxsw=process-tree"], True),
    ("idle", [], False),
    ("export sqlite", ["--export=sqlite"], True),
]


class Probe:
    """The launched child and its session."""

    def __init__(self, nsys: str) -> None:
        self.nsys = nsys
        self.dir = tempfile.mkdtemp(prefix="gpumagic-stop-probe-")
        self.fifo = os.path.join(self.dir, "cmd")
        os.mkfifo(self.fifo)
        self.done = os.path.join(self.dir, "done")
        t = time.time()
        self.launcher = subprocess.Popen(
            [nsys, "launch", "--session-new=stop-probe", "-t", "cuda,nvtx", *self.program()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        while not os.path.exists(self.done + ".ready"):
            if self.launcher.poll() is not None or time.time() - t > 120:
                raise SystemExit("the child under nsys launch did not start")
            time.sleep(0.01)
        self.ready_s = time.time() - t
        self.fd = os.open(self.fifo, os.O_WRONLY)

    def program(self) -> list[str]:
        return [sys.executable, "-c", CHILD, self.fifo, self.done]

    def cycle(self, n: int, options: list[str], work: bool) -> dict[str, Any]:
        stem = os.path.join(self.dir, f"r{n}")
        t0 = time.time()
        command = [self.nsys, "start", "--session=stop-probe", "-o", stem]
        start = subprocess.run(
            [*command, "--force-overwrite=true", *options],
            capture_output=True,
            text=True,
        )
        t1 = time.time()
        time.sleep(0.15)  # as gpumagic waits after `nsys start`
        if os.path.exists(self.done):
            os.remove(self.done)
        os.write(self.fd, b"work\n" if work else b"idle\n")
        while not os.path.exists(self.done):
            time.sleep(0.002)
        seen: dict[str, float] = {}
        watching = [True]

        def watch() -> None:
            while watching[0]:
                for name in os.listdir(self.dir):
                    if name.startswith(f"r{n}.") and name not in seen:
                        seen[name] = time.time()
                time.sleep(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        t2 = time.time()
        stop = subprocess.run(
            [self.nsys, "stop", "--session=stop-probe"], capture_output=True, text=True
        )
        t3 = time.time()
        time.sleep(0.05)
        watching[0] = False
        watcher.join()
        return {
            "start_s": t1 - t0,
            "start_rc": start.returncode,
            "stop_s": t3 - t2,
            "stop_rc": stop.returncode,
            "files_s": {k: v - t2 for k, v in sorted(seen.items(), key=lambda kv: kv[1])},
        }

    def close(self) -> None:
        try:
            os.write(self.fd, b"exit\n")
        except OSError:
            pass
        subprocess.run(
            [self.nsys, "shutdown", "--session=stop-probe", "--kill=sigkill"],
            capture_output=True,
        )
        try:
            self.launcher.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.launcher.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nsys", default=None, help="the nsys binary (default: PATH)")
    ap.add_argument("--cycles", type=int, default=3, help="cycles of each variant, interleaved")
    ap.add_argument("--json", default=None, help="where the figures go")
    args = ap.parse_args()
    nsys = args.nsys or shutil.which("nsys")
    if nsys is None:
        raise SystemExit("no nsys here: this probe times Nsight Systems itself")
    probe = Probe(nsys)
    rows: list[dict[str, Any]] = []
    try:
        for rep in range(args.cycles):
            for label, options, work in VARIANTS:
                row = probe.cycle(len(rows), options, work)
                row.update(variant=label, options=options, work=work, repeat=rep)
                rows.append(row)
    finally:
        probe.close()
    version = subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; child ready under nsys launch after {probe.ready_s:.2f} s")
    print(f"{'variant':15}{'nsys start s':>14}{'nsys stop s (each)':>34}{'median':>9}")
    for label, _, _ in VARIANTS:
        mine = [r for r in rows if r["variant"] == label]
        stops = [r["stop_s"] for r in mine]
        print(
            f"{label:15}{statistics.median(r['start_s'] for r in mine):14.2f}"
            f"{', '.join(f'{s:.2f}' for s in stops):>34}{statistics.median(stops):9.2f}"
        )
    failed = [r for r in rows if r["start_rc"] or r["stop_rc"]]
    if failed:
        print(f"{len(failed)} cycle(s) where nsys start or stop failed: {failed}")
    path = args.json or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "nsys_stop_probe.json"
    )
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"nsys": version, "ready_s": probe.ready_s, "rows": rows}, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
