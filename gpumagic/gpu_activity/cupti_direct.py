"""GPU activity records straight from CUPTI's Activity API, through NVIDIA's ``cupti-python``
bindings.

Why: gpumagic starts a profiler in four places only to learn how long the GPU ran a statement's
kernels (the kernel pass of ``%gputime``, ``--compare``, ``sweep``, and the ranking pass of
``--ncu``). torch.profiler's first start in a process costs 5-8 s (kineto's start, measured on an
H100 host with torch 2.11); CUPTI's own start, driven directly, costs 0.02-0.03 s and gives the same
kernel durations. So these passes ask CUPTI themselves, and keep torch.profiler only as the fallback
(:mod:`gpumagic.gpu_activity`).

One recording is: register buffer callbacks, enable the kinds, run, flush, disable, flush again.
Nothing stays enabled between recordings, so a user's own torch.profiler (or ``%%gpuprofile``) works
after ours, and ours again after it (kineto registers its own callbacks when it starts; we register
ours at every recording).

Launches are recorded too (runtime and driver API records, for their correlation ids): work issued
before the recording (a preload that keeps the GPU busy at its sustained clock) is told apart from
the recording's own by identity, never by a time window. Kernel names come mangled from CUPTI and
are demangled with the same ``__cxa_demangle`` that kineto uses (:func:`demangle`), so they read
exactly as torch.profiler's.

No torch import at module level; ``cupti`` is imported on first use only.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..edges import CuptiRecord

__all__ = [
    "Activity",
    "CuptiRefused",
    "Recording",
    "demangle",
    "install_hint",
    "recording",
    "refusal",
]

#: Bytes of each activity buffer CUPTI asks for (8 MiB, as NVIDIA's samples use: room for ~20k
#: kernel records).
BUFFER_BYTES = 8 * 2**20
#: The cupti-python line that pip installs beside each CUDA major without moving torch's own CUDA
#: libraries: torch 2.13's CUDA 13 build pins ``nvidia-cuda-cupti==13.0.85.*`` (through
#: ``cuda-toolkit[cupti]==13.0.3``); cupti-python 13.0.x accepts ``~=13.0`` while 13.2 and later ask
#: for ``~=13.2`` and would replace it.
PIP_SPEC = {"12": "cupti-python==12.8.*", "13": "cupti-python==13.0.*"}
#: CUPTI results after which no later recording in this process can succeed (reported once, not
#: retried).
LASTING = {
    "ERROR_NOT_COMPATIBLE",
    "ERROR_INSUFFICIENT_PRIVILEGES",
    "ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED",
}


#: Why no kernel pass runs under nsys or ncu: the tool holds CUPTI, so neither CUPTI directly nor
#: torch.profiler can record (torch.profiler would pay its start for nothing), and the tool's own
#: report has every kernel.
TOOL_HOLDS_CUPTI = (
    "a profiling tool (nsys or ncu) holds CUPTI in this process; the kernels "
    "and their times are in its own report"
)


class CuptiRefused(RuntimeError):
    """CUPTI cannot be driven directly here; ``reason`` says why in a clause, ``fix`` what to do
    (may be empty), ``lasting`` whether asking again in this process is pointless."""

    def __init__(self, reason: str, fix: str = "", lasting: bool = True) -> None:
        super().__init__(reason + (f" ({fix})" if fix else ""))
        self.reason = reason
        self.fix = fix
        self.lasting = lasting


@dataclass(frozen=True)
class Activity:
    """One GPU activity: a kernel, a memory copy or a memset, in CUPTI's nanoseconds."""

    kind: str  # "kernel", "memcpy" or "memset"
    name: (
        str  # kernels: demangled, as torch.profiler spells them; "Memcpy HtoD", "Memset" otherwise
    )
    start: int
    end: int
    device: int
    stream: int
    correlation: int


@dataclass
class Recording:
    """What one recording saw: its GPU activities, the correlation ids of the launches it recorded,
    and which profiler recorded them (``backend``), with the seconds a first start cost and why the
    fallback was used."""

    activities: list[Activity] = field(default_factory=list)
    launched: set[int] = field(default_factory=set)
    backend: str = "cupti"
    startup: float | None = None
    fallback: str | None = None
    #: (first start, last end) of the recorded launches, in the records' clock (direct recordings
    #: only)
    api_span: tuple[int, int] | None = None
    #: False where the records' clock is not nanoseconds (see :func:`recording`): their durations
    #: cannot be used
    trusted: bool = True

    def gpu(
        self, device: int | None = None, launched_only: bool = True, exclude: Iterable[str] = ()
    ) -> list[Activity]:
        """The activities on ``device`` (all devices for None); with ``launched_only`` only those
        whose launch this recording saw (where it saw any); those named in ``exclude`` left out (an
        L2 flush's own kernels)."""
        skip = frozenset(exclude)
        keep_all = not (launched_only and self.launched)
        return [
            a
            for a in self.activities
            if (device is None or a.device == device)
            and (keep_all or a.correlation in self.launched)
            and a.name not in skip
        ]

    def intervals(
        self, device: int | None = None, exclude: Iterable[str] = ()
    ) -> list[tuple[int, int]]:
        """(start, end) nanoseconds of :meth:`gpu`'s activities."""
        return [(a.start, a.end) for a in self.gpu(device, exclude=exclude)]


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """A mangled kernel name as torch.profiler spells it (``__cxa_demangle`` through
    ``torch._C._demangle``, the demangler kineto calls); the name itself where it is not mangled or
    torch is not loaded."""
    if not name.startswith("_Z"):
        return name
    torch = sys.modules.get("torch")
    fn = getattr(getattr(torch, "_C", None), "_demangle", None)
    if fn is None:
        return name
    try:
        return str(fn(name))
    except Exception:  # noqa: BLE001 - a name it cannot read stays as it came
        return name


def install_hint(cuda: str | None) -> str:
    """The pip command that installs the cupti-python matching a CUDA version
    (``torch.version.cuda``)."""
    major = (cuda or "13").split(".")[0]
    return f'pip install "{PIP_SPEC.get(major, f"cupti-python=={major}.*")}"'


def _binding_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("cupti-python")
    except Exception:  # noqa: BLE001 - not installed as a distribution (a bare copy on the path)
        return None


_LASTING: list[CuptiRefused] = []  # the refusal that holds for the rest of the process, once found


def torch_profiler_running() -> bool:
    """Whether a torch.profiler capture is running in this process (never imports torch)."""
    profiler = getattr(getattr(sys.modules.get("torch"), "autograd", None), "profiler", None)
    return bool(getattr(profiler, "_is_profiler_enabled", False))


def refusal() -> CuptiRefused | None:
    """Why CUPTI cannot be driven directly now, found without enabling anything; None where it can
    be tried.

    The import of the binding is the one cost (0.1-0.2 s, paid once); a refusal that holds for the
    process (no binding, a binding for another CUDA major, CUPTI refusing this driver) is
    remembered.
    """
    if _LASTING:
        return _LASTING[0]
    torch = sys.modules.get("torch")
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    if torch is None or cuda is None:
        return CuptiRefused("this torch has no CUDA", lasting=False)
    if os.environ.get("CUDA_INJECTION64_PATH"):
        # nsys and ncu load themselves into the process through this variable and hold CUPTI:
        # registering our own activity callbacks there could take their records, so we never try
        return CuptiRefused(TOOL_HOLDS_CUPTI, lasting=False)
    if torch_profiler_running():
        return CuptiRefused("a torch.profiler capture is running in this process", lasting=False)
    try:
        _module()
    except CuptiRefused as exc:
        return exc
    return None


def _module() -> ModuleType:
    """``cupti.cupti``, checked against torch's CUDA major; raises (and remembers)
    :class:`CuptiRefused`."""
    if _LASTING:
        raise _LASTING[0]
    cuda = sys.modules["torch"].version.cuda
    try:
        from cupti import cupti
    except Exception as exc:
        why = (
            "cupti-python is not installed"
            if isinstance(exc, ModuleNotFoundError)
            else f"cupti-python: {exc}"
        )
        _LASTING.append(CuptiRefused(why, install_hint(cuda)))
        raise _LASTING[0] from exc
    have = _binding_version()
    if have and have.split(".")[0] != cuda.split(".")[0]:
        _LASTING.append(
            CuptiRefused(
                f"cupti-python {have} is for CUDA {have.split('.')[0]}, torch uses CUDA {cuda}",
                install_hint(cuda),
            )
        )
        raise _LASTING[0]
    binding: ModuleType = cupti  # cupti-python ships no types
    return binding


def _collector(
    cupti: ModuleType, out: Recording
) -> tuple[Callable[[], tuple[int, int]], Callable[[list[CuptiRecord]], None]]:
    """CUPTI's two buffer callbacks, filling ``out``. Fields are copied out inside the callback: a
    record object points into a buffer that CUPTI reuses once the callback returns."""
    kind = cupti.ActivityKind
    kernel_kinds = {int(kind.CONCURRENT_KERNEL), int(kind.KERNEL)}
    api_kinds = {int(kind.RUNTIME), int(kind.DRIVER)}
    memcpy, memset = int(kind.MEMCPY), int(kind.MEMSET)
    copy_names = {int(k): k.name for k in cupti.ActivityMemcpyKind}
    spelled = {"HTOD": "HtoD", "DTOH": "DtoH", "DTOD": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP"}
    acts, launched = out.activities, out.launched

    def requested() -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def completed(records: list[CuptiRecord]) -> None:
        for r in records:
            k = int(r.kind)
            if k in api_kinds:
                launched.add(r.correlation_id)
                span = out.api_span  # the launches' span so far, widened by each
                out.api_span = (
                    (r.start, r.end)
                    if span is None
                    else (min(span[0], r.start), max(span[1], r.end))
                )
                continue
            if k in kernel_kinds:
                what, name = "kernel", demangle(r.name)
            elif k == memcpy:
                copy = copy_names.get(int(r.copy_kind), "UNKNOWN")
                what, name = "memcpy", f"Memcpy {spelled.get(copy, copy)}"
            elif k == memset:
                what, name = "memset", "Memset"
            else:
                continue
            acts.append(
                Activity(what, name, r.start, r.end, r.device_id, r.stream_id, r.correlation_id)
            )

    return requested, completed


def _refused_by(cupti: ModuleType, exc: BaseException) -> CuptiRefused:
    status = getattr(exc, "status", None)
    try:
        name = cupti.Result(status).name
    except Exception:  # noqa: BLE001
        name = str(exc).strip() or type(exc).__name__
    if name == "ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED":
        return CuptiRefused(
            f"CUPTI is in use by another tool (nsys, ncu or a profiler): CUPTI_{name}",
            lasting=False,
        )
    if name in LASTING:
        fix = "a newer NVIDIA driver" if name == "ERROR_NOT_COMPATIBLE" else ""
        refused = CuptiRefused(f"CUPTI refused: CUPTI_{name}", fix)
        _LASTING.append(refused)
        return refused
    return CuptiRefused(f"CUPTI refused: CUPTI_{name}", lasting=False)


def _kinds(cupti: ModuleType) -> list[Any]:
    k = cupti.ActivityKind
    return [k.CONCURRENT_KERNEL, k.MEMCPY, k.MEMSET, k.RUNTIME, k.DRIVER]


@contextmanager
def recording() -> Iterator[Recording]:
    """CUPTI's kernel, memcpy, memset and launch records on for the block; the :class:`Recording`,
    filled when the block ends (the block waits for its GPU work, e.g. ends with
    ``torch.cuda.synchronize()``).

    Raises :class:`CuptiRefused` before the block runs where CUPTI cannot be used; an error in the
    block propagates. Whatever happens, CUPTI is left disabled and drained.
    """
    refused = refusal()
    if refused is not None:
        raise refused
    cupti = _module()
    out = Recording()
    requested, completed = _collector(cupti, out)
    enabled: list[Any] = []
    try:
        cupti.activity_register_callbacks(requested, completed)
        for kind in _kinds(cupti):
            cupti.activity_enable(kind)
            enabled.append(kind)
    except Exception as exc:
        _disable(cupti, enabled)
        raise _refused_by(cupti, exc) from exc
    try:
        t0 = time.perf_counter_ns()
        yield out
        wall = time.perf_counter_ns() - t0
        cupti.activity_flush_all(
            1
        )  # forced: every record of the block, delivered before this returns
    finally:
        _disable(cupti, enabled)
    _check_clock(out, wall)


#: How far the recorded launches' span may exceed the block's own wall time before the records'
#: clock is not nanoseconds: a share, and a floor (ns) for the records' own rounding.
CLOCK_SLACK = (1.05, 20_000)
#: Why a recording's clock is not CUPTI's own (said where torch.profiler records instead).
FOREIGN_CLOCK = (
    "torch.profiler has started in this process, and CUPTI's timestamps follow kineto's clock since"
)


def _check_clock(out: Recording, wall_ns: int) -> None:
    """Mark ``out`` untrusted (and remember it for the process) where its launches span more than
    the block lasted.

    Why: once torch.profiler has started in a process, kineto has given CUPTI a timestamp callback
    of its own (seen on an H100 host: every later direct recording read 2.1x the durations, the
    ratio of the TSC's rate to 1 GHz), and it keeps it for the life of the process. The launches of
    a block all happen inside it, so on a nanosecond clock their span cannot exceed the block's wall
    time; on kineto's it does by that ratio.
    """
    if out.api_span is None:
        return
    first, last = out.api_span
    share, floor = CLOCK_SLACK
    if last - first > wall_ns * share + floor:
        out.trusted = False
        _LASTING.append(CuptiRefused(FOREIGN_CLOCK))


def _disable(cupti: ModuleType, kinds: list[Any]) -> None:
    """Disable what was enabled and drain what is left, whatever state CUPTI is in."""
    for kind in reversed(kinds):
        try:
            cupti.activity_disable(kind)
        except Exception:  # noqa: BLE001 - cleanup goes on
            pass
    try:
        cupti.activity_flush_all(1)
    except Exception:  # noqa: BLE001
        pass
