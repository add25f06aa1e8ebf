"""The long-lived ``--nsys`` child: ``python -m gpumagic.capture.child.warm_child CTRL PARENT_PID
SESSION NSYS``, started once per kernel under ``nsys launch`` (``capture/nsys/warm.py`` says why and
how).

It imports torch and starts CUDA once, writes ``CTRL/ready.json`` and then serves cells, one at a
time, until told to exit or until its parent is gone. Commands come as one JSON line each through
the FIFO ``CTRL/cmd`` (a blocking read: while the child waits it makes no call that a tracer would
record as work): ``{"run": WORKDIR}`` runs the cell that ``WORKDIR/cell.json``
describes, its names restored from ``WORKDIR`` into a fresh namespace (nothing of an earlier cell's
names is left: each cell starts from ``{"__name__": "__main__"}`` plus its own shipped inputs),
with the same loop as the one-shot runner (``runner.run_spec``). After the warm-up it writes
``WORKDIR/warm`` and waits for ``{"go": true}`` (the parent has started the collection with ``nsys
start``) or ``{"abort": ...}``; after the captured runs it writes ``WORKDIR/done``. ``{"tidy":
true}``, sent once the collection has stopped, frees what the cell left (a garbage collection, the
allocator's cache), so that a cell's allocations look as they would in a fresh process. What the
process keeps from one cell to the next is what a warm process is for: imported modules, CUDA's
context, cuBLAS/cuDNN handles and compiled kernels.

A watcher thread ends the child when the parent process is gone (killed, crashed, a kernel restart)
or when ``CTRL`` is removed: it asks nsys to shut the session down (``nsys shutdown --kill``),
removes ``CTRL`` and exits, so that no Python process or nsys session outlives the kernel.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from typing import Any

from gpumagic.capture.child.runner import alive, write_whole
from gpumagic.edges import JsonValue

#: The FIFO the parent writes commands to.
CMD_FIFO = "cmd"
#: Written once the child can take cells: ``{"pid": ..., "marks": [...]}``.
READY_FILE = "ready.json"


class Aborted(RuntimeError):
    """The parent did not start the capture (``nsys start`` failed): the cell stops there."""


def write_json(path: str, data: JsonValue) -> None:
    """Written whole or not at all: the other side polls for the file."""
    write_whole(os.path.dirname(path), os.path.basename(path), json.dumps(data))


class Commands:
    """The parent's commands, one JSON line each, in order. The FIFO stays open (read and write)
    for the child's life: a command written while the child is busy waits in the pipe, none is lost
    between two reads, and the parent's open fails (ENXIO) only once the child is gone."""

    def __init__(self, ctrl: str) -> None:
        self.fd = os.open(os.path.join(ctrl, CMD_FIFO), os.O_RDWR)
        self.buffer = b""

    def next(self) -> dict[str, Any]:
        """The next command: blocks until the parent writes one."""
        while True:
            while b"\n" not in self.buffer:
                self.buffer += os.read(self.fd, 65536)
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line.strip():
                command: dict[str, Any] = json.loads(line)
                return command


def _watch(parent: int, ctrl: str, session: str, nsys: str) -> None:
    while alive(parent) and os.path.isdir(ctrl):
        time.sleep(0.25)
    shutil.rmtree(ctrl, ignore_errors=True)  # the parent that would have removed it is gone
    try:
        # the session ends with its process: no nsys left collecting for a kernel that is gone
        subprocess.run(
            [nsys, "shutdown", f"--session={session}", "--kill=sigkill"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        pass
    os._exit(0)


def _empty_caches() -> None:
    gc.collect()
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - a broken context is the next cell's error to show
        pass


def main(ctrl: str, parent: int, session: str, nsys: str) -> int:
    from gpumagic.capture.child.runner import run_spec, start_cuda
    from gpumagic.capture.phases import PhaseMarks

    threading.Thread(target=_watch, args=(parent, ctrl, session, nsys), daemon=True).start()
    marks = PhaseMarks()
    start_cuda(marks)
    commands = Commands(ctrl)
    write_json(
        os.path.join(ctrl, READY_FILE),
        {"pid": os.getpid(), "marks": marks.marks, "python": sys.executable},
    )
    while True:
        command = commands.next()
        if command.get("tidy"):
            _empty_caches()  # the previous cell's memory, freed once its collection has stopped
            continue
        if command.get("exit") or "run" not in command:
            return 0
        workdir = command["run"]
        with open(os.path.join(workdir, "cell.json"), encoding="utf-8") as f:
            spec = json.load(f)

        def hand_over(workdir: str = workdir) -> None:
            write_json(os.path.join(workdir, "warm"), {"at": time.time()})
            answer = commands.next()
            if not answer.get("go"):
                raise Aborted(str(answer.get("abort") or "the capture was not started"))

        rc = run_spec(workdir, spec, PhaseMarks(), before_capture=hand_over)
        write_json(os.path.join(workdir, "done"), {"rc": rc, "at": time.time()})


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]))
