"""The GPU activity of a block of work: from CUPTI directly
(:mod:`gpumagic.gpu_activity.cupti_direct`) where it can be driven, else from torch.profiler. The
one entry for every pass that needs kernel times and no CPU ops: the kernel pass of ``%gputime``
(and so of ``--compare`` and ``sweep``) and the ranking pass of ``--ncu``.

Why a fallback at all: the binding may be absent (it is an optional install), built for another CUDA
major, refused by an old driver, or CUPTI may be held by another tool. torch.profiler then records
the same activities, at the price of kineto's first start in the process (5-8 s on an H100 host),
paid once through :mod:`gpumagic.gpu_activity.profiler_start`. The
:class:`~gpumagic.gpu_activity.cupti_direct.Recording` says which backend recorded it, what a first
start cost, and why the fallback was taken, so the caller can say so in one line.

A module of its own below both users (``gpumagic.timing`` and ``gpumagic.capture``), as
``profiler_start`` is.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from ..edges import TorchValue
from . import cupti_direct
from .cupti_direct import Activity, CuptiRefused, Recording
from .profiler_start import profiler_state, profiling, warm_profiler

__all__ = ["from_kineto", "record", "recording"]

#: Why the fallback records once gpumagic has started torch.profiler itself (no start left to pay:
#: no note).
KINETO_STARTED = (
    "torch.profiler has started in this process (its start is paid; CUPTI's "
    "clock is kineto's since)"
)


@contextmanager
def recording(device: TorchValue | None = None, direct: bool = True) -> Iterator[Recording]:
    """Record the block (which waits for its GPU work) with CUPTI directly, else (or with
    ``direct=False``) with torch.profiler; the :class:`Recording` is filled when the block ends.
    ``device`` is where the fallback's one-time start runs (the current CUDA device for None). A
    fallback's :attr:`~Recording.fallback` says why, with the fix where there is one. Inside a
    torch.profiler capture of the user's own it refuses (:class:`CuptiRefused`, a ``RuntimeError``)
    before the block: a second profiler would stop theirs; so it does under nsys or ncu, which hold
    CUPTI (:data:`~gpumagic.gpu_activity.cupti_direct.TOOL_HOLDS_CUPTI`).
    """
    if cupti_direct.torch_profiler_running():
        # neither profiler may start inside a user's own capture: a nested torch.profiler stops
        # theirs
        raise CuptiRefused(
            "a torch.profiler capture is running in this process (one profiler at a time); "
            "its trace has the kernels",
            lasting=False,
        )
    if not direct:
        refused: CuptiRefused | None = CuptiRefused("torch.profiler was asked for", lasting=False)
    elif profiler_state() == "ready":
        refused = CuptiRefused(KINETO_STARTED, lasting=False)
    else:
        refused = cupti_direct.refusal()
    if refused is not None and refused.reason == cupti_direct.TOOL_HOLDS_CUPTI:
        raise refused  # the fallback could record nothing either: kineto's CUPTI is the tool's
    if refused is None:
        stack = ExitStack()
        try:
            rec = stack.enter_context(cupti_direct.recording())
        except CuptiRefused as exc:
            refused = exc
        else:
            with stack:
                yield rec
            return
    with _torch_profiler(device) as rec:
        rec.fallback = refused.reason + (f": `{refused.fix}`" if refused.fix else "")
        yield rec


def record(
    run: Callable[[], None], device: TorchValue | None = None, direct: bool = True
) -> Recording:
    """:func:`recording` of ``run()``, run once more under torch.profiler where the direct records
    turn out not to be on CUPTI's nanosecond clock (a torch.profiler of the user's own started
    earlier in the process)."""
    with recording(device, direct) as rec:
        run()
    if rec.trusted:
        return rec
    with recording(device, direct=False) as again:
        run()
    again.fallback = cupti_direct.FOREIGN_CLOCK
    return again


@contextmanager
def _torch_profiler(device: TorchValue | None) -> Iterator[Recording]:
    """The block under a CUDA-only torch.profiler capture, after the profiler's one-time start (a
    throwaway capture: kineto drops kernels at the start of a process's first capture, pytorch
    #192021)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    startup = warm_profiler(
        device if device is not None else torch.device("cuda", torch.cuda.current_device())
    )
    rec = Recording(backend="torch.profiler", startup=startup)
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*Profiler clears events at the end of each cycle"
        )
        with profiling(profile(activities=[ProfilerActivity.CUDA])) as prof:
            yield rec
    found = from_kineto(prof)
    rec.activities, rec.launched = found.activities, found.launched


def _kind(name: str) -> str:
    if name.startswith("Memcpy"):
        return "memcpy"
    if name.startswith("Memset"):
        return "memset"
    return "kernel"


def from_kineto(prof: TorchValue) -> Recording:
    """A finished torch.profiler capture's GPU activities and launches as a :class:`Recording`."""
    out = Recording(backend="torch.profiler")
    for ev in prof.profiler.kineto_results.events():
        if str(ev.device_type()).endswith("CUDA"):
            start = ev.start_ns()
            stream = getattr(ev, "device_resource_id", lambda: 0)()
            name = ev.name()
            out.activities.append(
                Activity(
                    _kind(name),
                    name,
                    start,
                    start + ev.duration_ns(),
                    ev.device_index(),
                    stream,
                    ev.correlation_id(),
                )
            )
        elif ev.correlation_id():
            out.launched.add(ev.correlation_id())
    return out
