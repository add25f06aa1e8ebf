"""The passes after sampling: GPU kernel time from the activity records (CUPTI), and the host's time
to issue a call.

The kernel pass records through CUPTI directly, whose start costs hundredths of a second, so every
measurement has it. Where it falls back to torch.profiler (no ``cupti-python``, a binding for
another CUDA major, CUPTI refused), the first pass of a process pays kineto's start (5-8 s on an
H100 host): the note says so, why, and what to install.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..errors import Hint
from ..gpu_activity.cupti_direct import CuptiRefused
from .options import TimingOptions
from .samplers import Sampler
from .steps import Calibration, KernelFigures, Notes

__all__ = ["PROFILER_START", "host_pass", "kernel_pass"]

#: The settings the notes advise, each written once (the magics layer respells them as ``%config``
#: lines).
SKIP_KERNEL_PASS = Hint("kernel_time", "False")

#: Floor (seconds) of a per-call estimate where it divides, so a zero-time estimate cannot divide by
#: zero.
TINY = 1e-9
#: A profiler first start slower than this (seconds) is worth a note: it is paid once per process.
SLOW_PROFILER_START = 1.0
#: The words that start the note on a slow first start (a sweep finds it among its points' notes by
#: them).
PROFILER_START = "The profiler's first start in this process took"
#: Launches the host pass issues at most, so that the launch queue never fills and issuing never
#: waits on the GPU.
MAX_HOST_PASS_LAUNCHES = 256
#: Seconds of device work one host pass may queue at most: the pass waits for it to drain, and for a
#: GPU-bound statement (2.65 ms per call) 200 calls would cost half a second of waiting for a figure
#: the verdict barely needs.
HOST_PASS_DEVICE_TIME = 0.01
#: The host pass runs this many times and the fastest is kept: noise (interrupts, GC elsewhere) only
#: slows it.
HOST_PASS_REPEATS = 3


def kernel_pass(
    sampler: Sampler,
    inner: Callable[[int], None],
    opts: TimingOptions,
    cal: Calibration,
    notes: Notes,
) -> KernelFigures:
    """GPU busy time and activities per call from a short profiler (CUPTI) pass, with notes where it
    has none.

    A GPU-bound statement is preloaded (the GPU stays busy, at its sustained clocks, while the
    profiler starts); a launch-bound one idles between calls anyway. A profiler that cannot start
    (another CUPTI subscriber such as nsys or ncu, or a profiler already running) is a note, never
    an error: the samples stand on their own.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    unit = cal.calls_per_sample if sampler.replays_graph else 1  # a graph replay runs k calls
    units = max(1, math.ceil(opts.kernel_pass_time / max(unit * cal.per_call, TINY)))
    units = int(min(units, max(1, opts.max_kernel_pass_calls // unit)))
    preload = 0
    if cal.host_per_call < cal.per_call:
        preload = int(
            min(
                math.ceil(opts.kernel_preload_time / (unit * cal.per_call)),
                opts.max_kernel_pass_calls,
            )
        )
    refused = False
    try:
        found = sampler.kernel_pass(inner, units, preload)
    except (
        CuptiRefused
    ) as exc:  # nsys/ncu or the user's own torch.profiler holds the GPU's records: say that, once
        notes.add(f"GPU kernel time not measured: {exc.reason}.")
        found, refused = None, True
    except RuntimeError as exc:
        notes.add(f"GPU kernel time unavailable: {str(exc).splitlines()[0] if str(exc) else exc!r}")
        found, refused = None, True
    startup = sampler.profiler_startup
    if startup is not None and startup > SLOW_PROFILER_START:
        why = sampler.kernel_pass_fallback or "CUPTI could not be driven directly"
        notes.advise(
            f"{PROFILER_START} {startup:.1f} s (torch.profiler's start-up, once per process; "
            f"it recorded the kernels "
            f"because {why}); `{SKIP_KERNEL_PASS.script()}` skips the kernel-time pass.",
            SKIP_KERNEL_PASS,
        )
    pass_notes = sampler.kernel_pass_notes()
    notes.add(*pass_notes)
    if found is None:
        if (
            not pass_notes and not refused
        ):  # a pass that did not run saw nothing, which says nothing of the GPU
            notes.add(
                "The profiler saw no GPU activity from this statement: is it running on the GPU?"
            )
        return KernelFigures()
    return KernelFigures(
        kernel_time=found[0] / unit,
        kernels_per_call=found[1] / unit,
        clock=sampler.kernel_pass_clock,
    )


def host_pass(
    sampler: Sampler,
    inner: Callable[[int], None],
    opts: TimingOptions,
    cal: Calibration,
    kernels_per_call: float | None,
) -> float:
    """Host seconds to issue one call: the best of a few short passes of ``host_pass_time``.

    Few enough calls that their launches never fill the launch queue (a full queue makes the host
    wait on the GPU, and the figure would be device time again), and few enough that the device work
    they queue drains quickly.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    issue_calls = math.ceil(opts.host_pass_time / max(cal.host_per_call, TINY))
    launch_cap = MAX_HOST_PASS_LAUNCHES // max(1, math.ceil(kernels_per_call or 1))
    device_cap = math.ceil(HOST_PASS_DEVICE_TIME / max(cal.per_call, TINY))
    calls = int(max(1, min(launch_cap, issue_calls, device_cap)))
    return min(sampler.host_pass(inner, calls) for _ in range(HOST_PASS_REPEATS))
