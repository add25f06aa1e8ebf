"""The script the ``--nsys`` subprocess runs:  python -m gpumagic.capture.child.runner WORKDIR

It restores the shipped names, runs the setup code, then the same warm-up-then-capture loop as every
backend (``capture/cell.py``) with the NVTX range named in ``cell.json`` as the capture context:
that range is nsys' capture range. It never starts torch.profiler: CUPTI allows one subscriber, and
nsys is it (pytorch #117935). An exception in the cell is written to ``error.txt`` (its traceback,
shown as the cell's error) and the exit code is 3; the cell's value (its trailing expression's, last
captured run) is written, as its repr, to ``value.txt``. Its phases (torch import, CUDA init,
inputs, setup, warm-up, capture) go to ``phases.json`` (``capture/phases.py``); the warm child
(``capture/child/warm_child.py``) runs each of its cells through the same :func:`run_spec`.

With ``nproc`` of 2 or more in ``cell.json`` it is one rank of a ``--nproc`` launch
(``capture/nsys/rank_launch.py``; why the capture range is bracketed as it is:
``capture/nsys/ranks.py``). Each rank reads RANK, LOCAL_RANK and WORLD_SIZE; with CUDA it checks
there is a GPU per local rank (else ``gpus-rankR.txt``, the count, exit 4) and calls
``torch.cuda.set_device(local_rank)`` before anything else touches CUDA; it joins the process group
itself (NCCL with CUDA, gloo without), so the cell may use ``dist`` as a training script would; the
shipped names come back with every CUDA tensor on the rank's own device (``restore(..., device=)``);
``dist``, ``rank``, ``world_size``, ``local_rank`` and ``device`` are put in the cell's namespace
over any shipped names of the same name (the notebook's ``rank`` is not this rank's). The capture
opens on every rank together, and the NVTX mark ``gpumagic rank=R local_rank=L world=W``
(:data:`RANK_MARK`) is emitted inside the cell's range, first thing, so a reader can tell which
process is which rank. Only rank 0 writes ``value.txt``; a rank that raises writes
``error-rankR.txt`` and exits 3 without waiting for the others (the launcher stops them); the
process group is destroyed after a run that went well.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpumagic.edges import TorchValue, UserValue

if TYPE_CHECKING:
    from gpumagic.capture.phases import PhaseMarks

#: The NVTX mark each rank emits at the start of its captured range (the readers map processes to
#: ranks by it).
RANK_MARK = "gpumagic rank={rank} local_rank={local_rank} world={world_size}"


def _nvtx() -> tuple[Callable[[str], Any], Callable[[], Any]]:
    from gpumagic.capture.marks.nvtx_calls import push_pop

    return push_pop()


def _sync() -> Callable[[], None]:
    from gpumagic.capture.marks.nvtx_calls import synchronize

    return synchronize()


def _cell_traceback(exc: BaseException) -> str:
    """The traceback as the cell's own: the frames of gpumagic's loop around it are left out."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # capture/, the loop's home
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if not f.filename.startswith(here)]
    )
    return "".join(te.format())


#: ``--gated``: the file the parent writes "go" or "stop" to (``capture/ncu/backend.py``), and the
#: file the marks of the process's start, before the gate, go to.
GATE_FILE, EARLY_PHASES_FILE = "gate", "phases-early.json"
#: Seconds between looks for the files the parent hands over.
POLL = 0.005


def main(workdir: str, gated: bool = False) -> int:
    from gpumagic.capture.phases import PhaseMarks

    marks = PhaseMarks()
    if gated:
        return gated_main(workdir, marks)
    with open(os.path.join(workdir, "cell.json"), encoding="utf-8") as f:
        spec = json.load(f)
    if (spec.get("nproc") or 1) > 1:
        return rank_main(workdir, spec, marks)
    start_cuda(marks)
    return run_spec(workdir, spec, marks)


def gated_main(workdir: str, early: PhaseMarks) -> int:
    """``--gated``: started before the parent has decided to use it (``capture/ncu/backend.py``
    starts it beside the first pass), this process imports torch and starts CUDA at once, then waits
    for ``cell.json`` and for the gate: "go" runs the cell as :func:`main` would, "stop" ends it
    with nothing run. It also ends where the work dir goes away or the notebook's process
    (``GPUMAGIC_PARENT_PID``) is gone: no orphan waits for a gate nobody will open."""
    from gpumagic.capture.phases import PhaseMarks

    start_cuda(early)
    with early.mark("waiting for the first pass"):
        go = await_file(workdir, "cell.json") and await_file(workdir, GATE_FILE)
        if go:
            with open(os.path.join(workdir, GATE_FILE), encoding="utf-8") as f:
                go = f.read().strip() == "go"
    early.write(workdir, EARLY_PHASES_FILE)
    if not go:
        return 0
    with open(os.path.join(workdir, "cell.json"), encoding="utf-8") as f:
        spec = json.load(f)
    return run_spec(workdir, spec, PhaseMarks())


def await_file(workdir: str, name: str) -> bool:
    """Whether file ``name`` arrived in ``workdir`` (each is written whole, by a rename), or the
    wait was given up: the work dir gone, the parent gone, ``GPUMAGIC_GATE_LIMIT`` seconds (the
    run's time limit) past."""
    path = os.path.join(workdir, name)
    parent = int(os.environ.get("GPUMAGIC_PARENT_PID") or 0)
    deadline = time.monotonic() + float(os.environ.get("GPUMAGIC_GATE_LIMIT") or 3600)
    looks = 0
    while not os.path.exists(path):
        looks += 1
        if looks % 100 == 0 and (
            not os.path.isdir(workdir)
            or (parent > 0 and not alive(parent))
            or time.monotonic() > deadline
        ):
            return False
        time.sleep(POLL)
    return True


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's: the parent's, or one of its number
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def start_cuda(marks: PhaseMarks) -> None:
    """Import torch and start CUDA (a context on the current device) as phases of their own, so
    that the breakdown says what the child's start costs; a failure here is left to the cell.

    The driver's start (``cuInit`` and the device's primary context, the one the CUDA runtime and
    so torch use) runs in a thread while torch imports (:func:`start_driver`): under a tool that
    injects itself at ``cuInit`` it is most of "CUDA init", and the import leaves the GIL often
    enough for the two to overlap. ``GPUMAGIC_CUDA_EARLY=0`` starts CUDA after the import, as
    torch alone would."""
    driver = start_driver() if os.environ.get("GPUMAGIC_CUDA_EARLY", "1") != "0" else None
    try:
        with marks.mark("torch import"):
            try:
                import torch
            except ImportError:
                return
        with marks.mark("CUDA init"):
            if driver is not None:
                driver.join()
            try:
                if torch.cuda.is_available():
                    torch.empty(1, device="cuda")  # the context: outside any capture range
            except Exception:  # noqa: BLE001 - a broken CUDA is the cell's error to show, not ours
                pass
    finally:
        if driver is not None:  # torch holds the context now (or never will: no torch)
            driver.join()
            driver.release()


class _Driver(threading.Thread):
    """``cuInit(0)`` and a hold on device 0's primary context, through the driver library alone
    (ctypes releases the GIL for each call). The hold is given back once torch holds the context
    itself (:meth:`release`), so the context's use count ends as torch alone would leave it."""

    def __init__(self) -> None:
        super().__init__(name="gpumagic-cuda-start", daemon=True)
        self.lib: ctypes.CDLL | None = None
        self.device = ctypes.c_int(0)
        self.held = False

    def run(self) -> None:
        try:
            lib = driver_library()
        except OSError:
            return  # no driver: torch finds no GPU either
        ctx = ctypes.c_void_p()
        if lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(self.device), 0) != 0:
            return
        self.lib = lib
        self.held = lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.device) == 0

    def release(self) -> None:
        if self.held and self.lib is not None:  # held only once the library is loaded
            self.held = False
            # the _v2 entry point is the one cuda.h names since CUDA 11
            release = getattr(self.lib, "cuDevicePrimaryCtxRelease_v2", None)
            (release or self.lib.cuDevicePrimaryCtxRelease)(self.device)


def driver_library() -> ctypes.CDLL:
    """The CUDA driver's library, as ctypes loads it (OSError where there is none)."""
    return ctypes.CDLL("libcuda.so.1")


def start_driver() -> _Driver | None:
    """Start CUDA's driver in a thread (:class:`_Driver`); None where there is no GPU to start
    (no visible device) or threads cannot start."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return None
    # the driver reads it at cuInit, which now comes before torch's own start sets it (where
    # unset) to load each kernel on first use: with an older driver's eager default, the
    # context would load every kernel of torch's libraries
    os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")
    driver = _Driver()
    try:
        driver.start()
    except RuntimeError:
        return None
    return driver


def run_spec(
    workdir: str,
    spec: dict[str, Any],
    marks: PhaseMarks,
    before_capture: Callable[[], None] = lambda: None,
) -> int:
    """One cell as ``cell.json`` says, its names restored from ``workdir`` into a fresh
    namespace: setup, warm-up, then the captured runs in the NVTX range ``label`` (entered after
    ``before_capture()``, the warm child's hand-over to the parent). Writes ``value.txt``, or
    ``error.txt`` and returns 3; the phases go to ``phases.json`` either way."""
    from gpumagic.capture.child.shipping import restore

    push, pop = _nvtx()
    warm_up = WarmUp(marks)

    @contextmanager
    def nvtx_range() -> Iterator[None]:
        warm_up.over()
        before_capture()
        start = time.time()
        push(spec["label"])
        try:
            if spec.get("code_marks"):  # the by-code view's ranges, as NVTX (marks/code_marks.py)
                from gpumagic.capture.marks.code_marks import nvtx_code_marks

                with nvtx_code_marks(ns, spec.get("functions")):
                    yield
            else:
                yield
        finally:
            pop()
            marks.add("capture", start, time.time())

    try:
        ns: dict[str, Any] = {"__name__": "__main__"}
        with marks.mark("inputs"):
            ns.update(restore(workdir))
        value = _setup_and_loop(spec, ns, marks, warm_up, nvtx_range)
        if value is not None:
            with open(os.path.join(workdir, "value.txt"), "w", encoding="utf-8") as f:
                f.write(repr(value))  # what Out[n] prints; the value itself stays here
    except BaseException as exc:  # noqa: BLE001 - report whatever stopped the cell, then exit non-zero
        with open(os.path.join(workdir, "error.txt"), "w", encoding="utf-8") as f:
            f.write(_cell_traceback(exc))
        return 3
    finally:
        marks.write(workdir)
    return 0


def _setup_and_loop(
    spec: dict[str, Any],
    ns: dict[str, Any],
    marks: PhaseMarks,
    warm_up: WarmUp,
    captured: Callable[[], AbstractContextManager[Any]],
) -> UserValue:
    """What every run of a ``cell.json`` does once its namespace ``ns`` is ready, in one process
    or in each rank: the setup code (a phase of its own), then the loop (``capture/cell.py``) over
    the cell, its lines marked where ``code_marks`` asks, the warm-up watched as a phase and the
    captured runs inside ``captured()``. The last captured run's value."""
    from gpumagic.capture.cell import Cell, compile_source, run_cell

    if spec.get("setup"):
        with marks.mark("setup"):
            exec(compile_source(spec["setup"], "<gpuprofile-setup>"), ns)  # noqa: S102 - the user's setup code
    if spec.get("code_marks") and isinstance(spec["cell"], str):
        from gpumagic.capture.marks.cell_lines import marked_cell

        cell = marked_cell(spec["cell"])
    else:
        cell = Cell.of(spec["cell"])
    warmup, iters = spec.get("warmup", 1), spec.get("iters", 1)
    return run_cell(cell, ns, warmup, iters, captured, _sync(), warm_up.watch)


class WarmUp:
    """The "warm-up" phase of a run: from the loop's warm-up (:meth:`watch`, the watch
    ``cell.run_cell`` keeps over it) to the capture's start (:meth:`over`)."""

    def __init__(self, marks: PhaseMarks) -> None:
        self.marks = marks
        self.began: float | None = None

    @contextmanager
    def watch(self) -> Iterator[None]:
        self.began = time.time()
        yield

    def over(self) -> None:
        now = time.time()
        self.marks.add("warm-up", self.began if self.began is not None else now, now)


def rank_main(workdir: str, spec: dict[str, Any], marks: PhaseMarks) -> int:
    """One rank of a ``--nproc`` run (see the module's docstring). Its phases (torch import, CUDA
    init, process group, inputs, setup, warm-up, capture) go to ``phases-rankR.json``
    (:func:`rank_phases_file`)."""
    from gpumagic.capture.child.shipping import restore

    rank, local_rank, world_size = (
        int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")
    )
    try:
        modules = _rank_torch(rank, marks)
        if modules is None:
            return 5
        torch, dist = modules
        with marks.mark("CUDA init"):
            device = _rank_device(torch, workdir, rank, local_rank, world_size)
        if device is None:
            return 4
        cuda = device.type == "cuda"
        with marks.mark("process group"):
            dist.init_process_group(backend="nccl" if cuda else "gloo")
            # gpumagic's own barriers: no kernel of theirs in the capture
            control = dist.new_group(backend="gloo")
        with marks.mark("inputs"):
            ns: dict[str, Any] = {"__name__": "__main__", **restore(workdir, device=device)}
        ns.update(dist=dist, rank=rank, world_size=world_size, local_rank=local_rank, device=device)
        warm_up = WarmUp(marks)
        captured = _RankCapture(
            marks,
            warm_up,
            dist,
            control,
            torch.cuda.profiler if cuda else None,
            _mark(cuda),
            spec["label"],
            RANK_MARK.format(rank=rank, local_rank=local_rank, world_size=world_size),
        )
        value = _setup_and_loop(spec, ns, marks, warm_up, captured.range)
        if rank == 0 and value is not None:
            write_whole(workdir, "value.txt", repr(value))
        with marks.mark("process group end"):
            dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - report whatever stopped this rank, then exit non-zero
        try:
            write_whole(workdir, f"error-rank{rank}.txt", _cell_traceback(exc))
            marks.write(workdir, rank_phases_file(rank))
        finally:
            _leave(3)
    marks.write(workdir, rank_phases_file(rank))
    return 0


def _rank_torch(rank: int, marks: PhaseMarks) -> tuple[ModuleType, ModuleType] | None:
    """torch and torch.distributed, imported as the "torch import" phase; None where torch itself
    is missing, said on stderr (``nsys/ranks.py`` names the Python). A broken torch (no
    ``torch._C``) raises: an error with its traceback."""
    with marks.mark("torch import"):
        try:
            import torch
            import torch.distributed as dist
        except ModuleNotFoundError as exc:
            if exc.name in ("torch", "torch.distributed"):
                print(f"gpumagic rank {rank}: {exc}", file=sys.stderr, flush=True)
                return None
            raise
    return torch, dist


def _rank_device(
    torch: ModuleType, workdir: str, rank: int, local_rank: int, world_size: int
) -> TorchValue | None:
    """This rank's device: with CUDA, GPU ``local_rank``, made current and its context started
    (outside the capture) before the names come back, so their CUDA tensors land there; else the
    CPU. None where the host has fewer GPUs than local ranks (the count is written to
    ``gpus-rankR.txt``)."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    if torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", world_size)):
        write_whole(workdir, f"gpus-rank{rank}.txt", str(torch.cuda.device_count()))
        return None
    torch.cuda.set_device(local_rank)
    torch.empty(1, device="cuda")  # the context: outside the capture
    return torch.device("cuda", local_rank)


class _RankCapture:
    """A rank's captured runs (:meth:`range`), opened and closed on every rank together: after
    every rank's warm-up the profiler starts (``cudaProfilerStart``: nsys'
    ``--capture-range=cudaProfilerApi``, ``profiler`` None without CUDA), and no rank runs the
    cell before every rank is recorded; inside the cell's NVTX range ``label`` the rank's mark
    ``text`` comes first. Each step is a phase."""

    def __init__(
        self,
        marks: PhaseMarks,
        warm_up: WarmUp,
        dist: ModuleType,
        control: TorchValue,
        profiler: ModuleType | None,
        mark: Callable[[str], Any],
        label: str,
        text: str,
    ) -> None:
        self.marks, self.warm_up, self.dist, self.control = marks, warm_up, dist, control
        self.profiler, self.mark, self.label, self.text = profiler, mark, label, text
        self.push, self.pop = _nvtx()

    def _barrier(self) -> None:
        self.dist.barrier(group=self.control)

    @contextmanager
    def range(self) -> Iterator[None]:
        marks = self.marks
        self.warm_up.over()
        start = time.time()
        self._barrier()  # every rank's warm-up is over (each synchronized its device first)
        if self.profiler is not None:
            self.profiler.start()  # the first rank's call starts nsys' capture
        self._barrier()  # every rank is being recorded before any runs the cell
        marks.add("tool start", start, time.time())
        start = time.time()
        self.push(self.label)
        self.mark(self.text)
        try:
            yield
        finally:
            self.pop()
        # not reached after an error: that rank leaves, the launcher stops the rest
        self._barrier()
        marks.add("capture", start, time.time())
        if self.profiler is not None:
            with marks.mark("tool stop"):
                self.profiler.stop()


def _leave(status: int) -> None:
    """End this rank now, its error written: a normal exit runs the process group's teardown,
    which can wait for ever on a peer that is itself waiting in a collective for this rank."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def rank_phases_file(rank: int) -> str:
    """The file rank ``rank`` of a ``--nproc`` run writes its phase marks to."""
    return f"phases-rank{rank}.json"


def _mark(cuda: bool) -> Callable[[str], Any]:
    if cuda:
        import torch

        return torch.cuda.nvtx.mark
    import nvtx

    return lambda text: nvtx.mark(message=text)


def write_whole(workdir: str, name: str, text: str) -> None:
    """Write whole or not at all: the parent may read the file while this process is being
    stopped."""
    path = os.path.join(workdir, name)
    with open(path + ".part", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".part", path)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], gated="--gated" in sys.argv[2:]))
