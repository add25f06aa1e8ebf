"""``%%gpuprofile --nsys --nproc N``: the cell as N ranks inside one ``nsys profile``, and what that
run leaves behind (this module is the parent's side; the ranks' side is
``capture/child/runner.py``).

**Launch.** ``nsys profile ... PYTHON capture/nsys/rank_launch.py N WORKDIR`` (run by path): a
launcher that imports no torch starts the N ranks at once with the environment a ``torchrun
--standalone`` rank has (``capture/nsys/rank_launch.py``; torchrun's own start cost 2.5 s before a
rank's first line ran). It runs in the interpreter gpumagic was told to use (``NsysOptions.python``,
else this one), so the ranks import the torch and gpumagic that the checks here looked at; one rank
per GPU. nsys samples no CPU and records no context switches (``options.LEAN``, as every nsys run of
gpumagic's, unless the user's ``--nsys-args`` set them).

**Capture range.** nsys keeps one collection per session, not one per process. If each rank opened
and closed an NVTX capture range on its own (``--capture-range=nvtx --capture-range-end=stop``), the
collection would follow whichever rank got there first: a rank that closes its range early stops the
recording while another is still finishing its cell, and that rank's range then has no end in the
export (readers drop such ranges). So with ranks, the capture range is
``--capture-range=cudaProfilerApi`` and the ranks open and close it together: after the warm-up
every rank synchronizes its device and meets the others at a barrier, calls ``cudaProfilerStart``
(the first call starts the collection, the others find it running), meets them again, and only then
opens the cell's NVTX range; after the cell, each rank synchronizes its device, closes its range,
meets the others, and calls ``cudaProfilerStop``. Whichever stop comes first, every rank's cell, its
GPU work and both ends of its NVTX range lie inside the collection. The barriers run over a gloo
group (CPU sockets): an NCCL barrier would put an all-reduce kernel of gpumagic's own into the
capture.

**Processes.** The ranks stay in the launcher's process group, under nsys'; the first rank that
fails takes the others down, and a launcher that is stopped stops them. Every process of the run
carries the run's private directory on its command line (nsys, the launcher, each rank), so on a
timeout, a Ctrl-C or after a finished run, :func:`stop_run_processes` also finds them by that
argument in ``/proc`` and stops them: no process outlives the run, even one that left its group.

**Outcomes.** A rank that raises writes ``error-rankR.txt`` (its traceback) and exits; the launcher
then stops the others. A rank that runs out of GPUs writes ``gpus-rankR.txt``; one that cannot
import torch says so in the run's output. :func:`rank_failure` turns those files (the earliest,
when several ranks failed: the first failure is the cause, the rest its echo) and the output into
the error to raise.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import sys
import time
from collections.abc import Sequence

from ...errors import (
    GpuMagicError,
    NotEnoughGpusError,
    NsysTimeoutError,
    RankError,
    TorchrunMissingError,
)
from ..child.runner import alive

__all__ = [
    "RanksTimeoutError",
    "check_before_launch",
    "launch_command",
    "rank_failure",
    "run_processes",
    "stop_run_processes",
]


class RanksTimeoutError(NsysTimeoutError):
    """The run of ``nproc`` ranks did not finish in ``timeout`` seconds; every rank was stopped with
    nsys, and ``partial_files`` were kept."""

    def __init__(self, timeout: float, partial_files: Sequence[str] = (), nproc: int = 2) -> None:
        self.nproc = nproc
        super().__init__(timeout, partial_files)

    def extra_fields(self) -> dict[str, object]:
        advice = (
            f"All {self.nproc} ranks were stopped with it. A rank waiting in a collective "
            f"that another rank never "
            "reaches (an NCCL hang) ends this way: check that every rank runs the same "
            "collectives in the same "
            "order; else raise the limit with --timeout S, or profile less work."
        )
        return {**super().extra_fields(), "advice": advice}


def launch_command(python: str, nproc: int, workdir: str) -> list[str]:
    """The launcher of ``nproc`` ranks on this host, in ``python``
    (``capture/nsys/rank_launch.py``)."""
    from .rank_launch import command

    return command(python, nproc, workdir)


def check_before_launch(nproc: int, python: str | None) -> None:
    """What can be known before nsys starts, from this process's torch if it is imported (importing
    it here would cost seconds): too few GPUs; torch.distributed missing from this interpreter when
    it is the one the ranks use. Otherwise the ranks find out and say so (:func:`rank_failure`)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    same_python = python is None or os.path.realpath(python) == os.path.realpath(sys.executable)
    distributed = getattr(torch, "distributed", None)
    if same_python and distributed is not None and not distributed.is_available():
        raise TorchrunMissingError(
            python=sys.executable, reason="torch.distributed.is_available() is False"
        )
    if torch.cuda.is_available() and torch.cuda.device_count() < nproc:
        raise _too_few(nproc, torch.cuda.device_count(), "this process")


def _too_few(nproc: int, available: int, where: str) -> NotEnoughGpusError:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return NotEnoughGpusError(
        nproc=nproc, available=available, where=where, visible=visible or "(unset)"
    )


_MISSING = re.compile(r"No module named '?(torch(?:\.distributed(?:\.run)?)?)'?")


def rank_failure(workdir: str, nproc: int, output: str, python: str) -> GpuMagicError | None:
    """The error the run's files and output mean, if any: a rank's report of too few GPUs, the first
    rank's traceback, or a Python without torch.distributed."""
    for path in sorted(glob.glob(os.path.join(workdir, "gpus-rank*.txt")), key=_written_at):
        with open(path, encoding="utf-8") as f:
            return _too_few(nproc, int(f.read().strip() or 0), f"rank {_rank_of(path)}")
    errors = sorted(glob.glob(os.path.join(workdir, "error-rank*.txt")), key=_written_at)
    if errors:
        with open(errors[0], encoding="utf-8") as f:
            return RankError(f.read(), rank=_rank_of(errors[0]), world_size=nproc)
    missing = _MISSING.search(output)
    if missing:
        return TorchrunMissingError(python=python, reason=missing.group(0))
    return None


def _written_at(path: str) -> int:
    return os.stat(path).st_mtime_ns


def _rank_of(path: str) -> int:
    found = re.search(r"-rank(\d+)\.txt$", path)
    return int(found.group(1)) if found else -1


# --- the run's processes
# -----------------------------------------------------------------------------------------


def run_processes(workdir: str) -> list[int]:
    """Every process (other than this one) with ``workdir`` as an argument: nsys, the launcher and
    the ranks of the run that uses it. Empty where there is no ``/proc``."""
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    target = os.fsencode(workdir)
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if target in args:
            found.append(pid)
    return found


def stop_run_processes(
    workdir: str, sig: int = signal.SIGKILL, wait: float = 0.0, skip_group: int | None = None
) -> list[int]:
    """Send ``sig`` to every process of the run (and to its process group when it leads one: a
    rank's own children), except those of the process group ``skip_group`` (signalled already: nsys
    must not get a second SIGINT); wait up to ``wait`` seconds for them to go. Returns the pids
    signalled."""
    pids = []
    for pid in run_processes(workdir):
        try:
            group = os.getpgid(pid)
            if group == skip_group:
                continue
            pids.append(pid)
            if group == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + wait
    while wait and time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return pids
