"""The profiler's one-time start, paid once per process, in the foreground or (if asked) on a background thread.

Why: CUPTI's first start in a process took 4-7 s on an H100 host, while a ``%gputime`` of a 2.65 ms matmul needs
about a quarter of a second. It also drops kernels at the start of a process's first capture (pytorch #192021).
So one throwaway capture absorbs both, once: in the foreground when a measurement needs the kernel time, or on a
background thread (``background_profiler_start``) once the process has imported torch and initialised CUDA itself
(it never does either). Measured on the H100 host (torch 2.11): the background start holds the GIL for most of its
seconds, so a statement run meanwhile waits for it anyway, and a torch.profiler capture started on another thread
at the same moment crashed the process (kineto's start is not thread-safe). Hence off by default, and guarded:
every capture of this package waits for it (:func:`wait_for_profiler`), the magics make a cell that mentions a
profiler wait for it, it waits while another profiler runs, and it runs its one tiny kernel on a stream of its own.
An error leaves the process unwarmed and is kept for the notes, never raised on the thread; the interpreter waits
for it at exit (bounded) so that CUPTI is never torn down under it.

A module of its own below both of its users: the timer's kernel pass (``gpumagic.timing``) and the capture backends
(a ``%%gpuprofile`` capture counts as the start; the ``--ncu`` first pass begins it early) share this one state.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "join_background",
    "mark_started",
    "profiler_state",
    "quiet_profiler",
    "start_background_warm",
    "wait_for_profiler",
    "warm_profiler",
]

#: Seconds the interpreter waits at exit for a background start still under way.
EXIT_WAIT = 15.0
#: Seconds between looks at whether torch and CUDA are up yet (a dictionary lookup each: nothing to speak of).
POLL = 0.2

#: Held while a start (throwaway capture) runs, on whichever thread, and by a measurement that must not overlap one.
_LOCK = threading.RLock()
_STATE: dict[str, Any] = {"warm": False, "startup": None, "error": None, "thread": None}
_STOP = threading.Event()


def profiler_state() -> str:
    """``"ready"`` (started in this process), ``"starting"`` (a background start is under way, or waiting for CUDA),
    or ``"cold"`` (nobody has started it)."""
    if _STATE["warm"]:
        return "ready"
    thread = _STATE["thread"]
    if thread is not None and thread.is_alive():
        return "starting"
    return "cold"


def mark_started() -> None:
    """A CUDA profiler capture ran in this process (``%%gpuprofile``): CUPTI's one-time start is paid, and a later
    kernel pass costs only its own time."""
    _STATE["warm"] = True


def startup_error() -> str | None:
    """The first line of the error a start ended with, if it failed (another CUPTI subscriber, such as nsys)."""
    return _STATE["error"]


def wait_for_profiler(timeout: float | None = None) -> bool:
    """Wait until no start is running (a background one, if any, has finished); True unless ``timeout`` ran out.

    Every capture of this package calls it first: two profiler captures at once in one process fail or corrupt each
    other. The lock is taken only while a start runs, so this costs nothing otherwise.
    """
    if threading.current_thread() is _STATE["thread"]:
        return True
    acquired = _LOCK.acquire(timeout=-1 if timeout is None else timeout)
    if acquired:
        _LOCK.release()
    return acquired


@contextmanager
def quiet_profiler(wait: bool = True) -> Iterator[bool]:
    """Keep a background start from beginning while the block runs (samples, a graph capture).

    Yields True when held. With ``wait=False`` and a start already running, the block runs at once, beside it, and
    yields False: the caller decides whether that matters (it does not for a GPU-bound statement, whose samples
    the profiler's per-launch host cost never reaches).
    """
    held = _LOCK.acquire(blocking=wait)
    try:
        yield held
    finally:
        if held:
            _LOCK.release()


def _throwaway_capture(device: Any) -> None:
    """One capture of one tiny kernel on a stream of its own, waited for on that stream only."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(device)
    side = torch.cuda.Stream(device)
    with torch.cuda.device(device), torch.cuda.stream(side):
        x = torch.ones(1, device=device)
        side.synchronize()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(activities=[ProfilerActivity.CUDA]):
                x.add_(1)
                side.synchronize()


def _start(device: Any, capture: Callable[[Any], None]) -> float | None:
    """Run the start under the lock unless already done; its seconds, or None when it was done before."""
    with _LOCK:
        if _STATE["warm"]:
            return None
        t0 = time.perf_counter()
        capture(device)
        _STATE["warm"] = True
        _STATE["startup"] = time.perf_counter() - t0
        return _STATE["startup"]


def warm_profiler(device: Any, capture: Callable[[Any], None] = _throwaway_capture) -> float | None:
    """Start the profiler in the foreground if this process has not yet; the seconds it took, or None.

    A background start under way is waited for (and its seconds are not this call's). An error (another CUPTI
    subscriber such as nsys) propagates and leaves the process unwarmed.
    """
    return _start(device, capture)


def _torch_ready() -> Any | None:
    """torch, once the process has imported it fully and initialised CUDA; None until then (never imports it).

    ``False`` when the imported torch has no CUDA at all (a CPU build): then there is nothing to wait for.
    """
    torch = sys.modules.get("torch")
    if torch is None or getattr(getattr(torch, "__spec__", None), "_initializing", False):
        return None
    try:
        if getattr(torch.version, "cuda", None) is None:
            return False
        if not torch.cuda.is_initialized():
            return None
        profiler_on = torch.autograd.profiler._is_profiler_enabled  # a capture of the user's own is running
    except AttributeError:
        return None
    return None if profiler_on else torch


def _background(device: Any, capture: Callable[[Any], None]) -> None:
    while not _STOP.is_set():
        torch = _torch_ready()
        if torch is False:
            return
        if torch is not None:
            break
        _STOP.wait(POLL)
    else:
        return
    try:
        _start(device if device is not None else torch.device("cuda", torch.cuda.current_device()), capture)
    except Exception as exc:  # noqa: BLE001 - kept for the notes; a thread must not raise into the user's session
        text = str(exc).strip()
        _STATE["error"] = text.splitlines()[0] if text else type(exc).__name__


def start_background_warm(device: Any = None, capture: Callable[[Any], None] = _throwaway_capture) -> bool:
    """Start the profiler on a background thread once the process has torch and CUDA up; True if a thread started.

    Nothing happens where the profiler is already started, a start is under way, or the last one failed.
    """
    if _STATE["warm"] or _STATE["error"] or profiler_state() == "starting":
        return False
    _STOP.clear()
    thread = threading.Thread(target=_background, args=(device, capture), name="gpumagic-profiler-start", daemon=True)
    _STATE["thread"] = thread
    thread.start()
    return True


def join_background(timeout: float | None = None) -> bool:
    """Wait for the background thread to end (its start done, or failed); True unless ``timeout`` ran out first.

    In a process that never initialises CUDA the thread waits for it until exit: give a timeout there.
    """
    thread = _STATE["thread"]
    if thread is None or thread is threading.current_thread():
        return True
    thread.join(timeout)
    return not thread.is_alive()


def stop_background_warm(timeout: float = EXIT_WAIT) -> None:
    """Stop waiting for CUDA, and wait (bounded) for a start under way: at exit and when the extension unloads."""
    _STOP.set()
    thread = _STATE["thread"]
    if thread is not None and thread.is_alive() and thread is not threading.current_thread():
        thread.join(timeout)


atexit.register(stop_background_warm)
