"""Options of the capture backends: the one place their defaults are written.

Light on purpose (no pandas, no torch): ``gpumagic.notebook.config`` reads these defaults for its
``%config`` traits when the extension loads, and a script passes the same dataclasses to a backend's
``capture()``.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import Hint, InvalidOptionError, UnwritablePathError

__all__ = [
    "ITERS",
    "WARMUP",
    "NcuOptions",
    "NsysOptions",
    "ProfileDirError",
    "SubprocessOptions",
    "TorchProfilerOptions",
    "label_slug",
    "ready_profile_dir",
    "report_stem",
]

#: Runs of the cell before the capture: lazy init, cuBLAS heuristics and autotuning land there, not
#: in the capture.
WARMUP = 1
#: Runs of the cell inside the capture.
ITERS = 1


@dataclass(frozen=True)
class TorchProfilerOptions:
    """``%%gpuprofile``'s default backend: torch.profiler in this process."""

    #: Record input shapes of torch ops (the op table's "Input shapes").
    record_shapes: bool = True
    #: Mark each forward of the namespace's models, and each line of the cell, with a range named
    #: as the code names it (the by-module and by-line views; ``capture/marks/module_ranges.py``):
    #: on a training step the host paces, +1.3% (d 128) and +7.0% (d 512) on an H200, +0.1% on this
    #: CPU (``benchmarks/by_code_cost.py``; the view may cost 10%).
    module_ranges: bool = True
    #: Record every Python call (torch's Python tracer, which also records each module's forward):
    #: +5.7% and +11.8% on the same H200 steps, so off: the ranges give the view without it.
    with_stack: bool = False
    #: Record TorchScript modules' hierarchy (torch's ``with_modules``: nothing of eager modules).
    with_modules: bool = False
    #: Profile CUDA activity too; None: where CUDA is available.
    cuda: bool | None = None


class SubprocessOptions:
    """What the backends that re-run a cell in a subprocess under a tool (nsys, ncu) check alike,
    before any work (no tool lookup, no directory, no subprocess): the tool's extra arguments and
    the time limit; :meth:`check_own` adds a backend's own checks."""

    extra_args: str
    timeout: float
    #: The magic's option that gives ``extra_args``, named in its error.
    extra_args_option: ClassVar[str]

    def validate(self) -> list[str]:
        """Raise :class:`~gpumagic.errors.InvalidOptionError` on the first problem; return the
        extra arguments, split as a shell would."""
        try:
            extra_args = shlex.split(self.extra_args)
        except ValueError as exc:
            raise InvalidOptionError(
                option=f"extra_args ({self.extra_args_option})",
                reason=f"is not a shell-quoted argument list ({exc}): close each quote, or quote "
                "the whole value once",
                value=self.extra_args,
            ) from None
        if not self.timeout > 0:
            raise InvalidOptionError(
                option="timeout", reason="must be a positive number of seconds", value=self.timeout
            )
        self.check_own()
        return extra_args

    def check_own(self) -> None:
        """A backend's own checks (none here)."""


class ProfileDirError(UnwritablePathError):
    """``profile_dir`` cannot keep a tool's reports: ``path`` (absolute) and ``reason``."""

    template = (
        "profile_dir: cannot keep the reports in {path} ({reason}). Give a directory you can "
        "write to: {hint}"
    )

    def __init__(self, path: str, reason: str) -> None:
        hint = Hint("profile_dir", "'/path/to/profiles'")
        super().__init__(hints=[hint], path=path, reason=reason, option="profile_dir")

    def extra_fields(self) -> dict[str, Any]:
        return {"hint": self.hints[0].script()}


def ready_profile_dir(path: str) -> str:
    """``path`` as an absolute directory, made where missing and tried for writing (a file made and
    removed), before the tool starts: a file there, or a directory without write permission, let
    nsys run the whole cell (16 s and more) and then failed as a bare FileNotFoundError."""
    where = os.path.abspath(path)
    if os.path.exists(where) and not os.path.isdir(where):
        raise ProfileDirError(where, "it is a file, not a directory")
    try:
        os.makedirs(where, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".gpumagic-write-check-", dir=where)
    except OSError as exc:
        reason = "no permission to write there" if isinstance(exc, PermissionError) else None
        raise ProfileDirError(where, reason or exc.strerror or str(exc)) from None
    os.close(fd)
    os.remove(probe)
    return where


def report_stem(profile_dir: str, label: str) -> str:
    """Where a tool writes its report of the cell ``label``, less the extension: in
    ``profile_dir`` (made ready by :func:`ready_profile_dir`), named by the time and the label, so
    that one cell's report never overwrites another's and a listing sorts them by time."""
    return os.path.join(profile_dir, f"{time.strftime('%Y%m%d-%H%M%S')}-{label_slug(label)}")


def label_slug(label: str) -> str:
    """A label as it can stand in a file name, and as a warm report's NVTX range is matched to
    it: every run of characters other than letters, digits, ``_``, ``.`` and ``-`` as one ``_``,
    at most 60 characters, "cell" for an empty one."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:60] or "cell"


#: What ``--counters`` adds to nsys: every GPU's metrics, 10,000 samples a second (one every
#: 100 µs), the set nsys chooses for the GPU.
COUNTER_ARGS = ("--gpu-metrics-devices=all", "--gpu-metrics-frequency=10000")


@dataclass(frozen=True)
class NsysOptions(SubprocessOptions):
    """``%%gpuprofile --nsys``: the cell in a subprocess under Nsight Systems."""

    #: The nsys binary; None: PATH, then the usual install locations.
    nsys_path: str | None = None
    #: Where the ``.nsys-rep`` and ``.sqlite`` files are kept.
    profile_dir: str = "gpumagic-profiles"
    #: What nsys traces (``-t``). Not ``osrt`` by default: nsys' conversion of OS runtime calls
    #: adds ~3 s to every capture's stop (H100, nsys 2025.3: ``nsys stop`` 5.8-6.7 s with it,
    #: 2.8-2.9 s without), and the report reads them only for its osrt_sum table;
    #: ``"cuda,nvtx,osrt"`` brings them back.
    trace: str = "cuda,nvtx"
    #: Extra ``nsys profile`` arguments, shell-split.
    extra_args: str = ""
    #: Seconds before the run is stopped (its partial files are kept).
    timeout: float = 300.0
    #: Code run in the subprocess before the cell (names that cannot be shipped).
    setup: str | None = None
    #: The Python that runs the cell; None: this one.
    python: str | None = None
    #: Ranks the cell runs as, one GPU each, inside the one nsys run (``--nproc``; launched by
    #: ``capture/nsys/rank_launch.py``); None or 1: one process, no torch.distributed.
    nproc: int | None = None
    #: Keep one child under nsys per process and reuse it for later cells
    #: (``capture/nsys/warm.py``); False: every run starts nsys, Python and CUDA afresh. Ranks
    #: (``nproc`` > 1) always do.
    warm: bool = True
    #: Sample the GPU's hardware counters in the same capture (``--counters``): nsys' GPU metrics
    #: (:data:`COUNTER_ARGS`), read onto the kernels (``capture/nsys/gpu_metrics.py``).
    counters: bool = False

    extra_args_option: ClassVar[str] = "--nsys-args"

    def tool_args(self) -> list[str]:
        """The extra arguments with what ``counters`` asks of nsys added (unless they set the GPU
        metrics themselves)."""
        args = self.validate()
        if self.counters and not any(a.startswith("--gpu-metrics-devices") for a in args):
            args += list(COUNTER_ARGS)
        return args

    def check_own(self) -> None:
        if self.nproc is not None and (type(self.nproc) is not int or self.nproc < 1):
            raise InvalidOptionError(
                option="nproc",
                reason="must be a whole number of ranks, 1 or more",
                value=self.nproc,
            )


@dataclass(frozen=True)
class NcuOptions(SubprocessOptions):
    """``%%gpuprofile --ncu``: the cell in a subprocess under Nsight Compute, restricted to its NVTX
    range."""

    #: The ncu binary; None: PATH, then the usual install locations.
    ncu_path: str | None = None
    #: Where the ``.ncu-rep`` files are kept.
    profile_dir: str = "gpumagic-profiles"
    #: Kernels profiled: the ``top`` names by total GPU time in a first, plain pass; 0: every kernel
    #: in the range.
    top: int = 5
    #: ncu's own kernel filter (``--kernel-name``: a name or ``regex:PATTERN``); replaces the first
    #: pass.
    kernel_filter: str | None = None
    #: Launches profiled per kernel and launch configuration (``--filter-mode per-launch-config``).
    launch_count: int = 1
    #: Start the profiled process beside the first pass (``capture/ncu/early.py``): it profiles
    #: every kernel where the first pass saw no more than ``top`` names, else ends unused.
    early_start: bool = True
    #: ``--section`` identifiers collected, unless ``section_set`` is given.
    sections: tuple[str, ...] = ("SpeedOfLight", "SpeedOfLight_RooflineChart")
    #: An ncu section set (``--set``: basic, roofline, full, ...) instead of ``sections``.
    section_set: str | None = None
    #: ``--clock-control``: "base" (ncu's default: clocks locked to base, durations longer than
    #: unlocked) or "none".
    clock_control: str = "base"
    #: Extra ``ncu`` arguments, shell-split.
    extra_args: str = ""
    #: Seconds before a run is stopped (its partial files are kept).
    timeout: float = 300.0
    #: Code run in the subprocess before the cell (names that cannot be shipped).
    setup: str | None = None
    #: The Python that runs the cell; None: this one.
    python: str | None = None

    extra_args_option: ClassVar[str] = "--ncu-args"

    def check_own(self) -> None:
        if self.top < 0:
            raise InvalidOptionError(
                option="top", reason="must be 0 (every kernel) or more", value=self.top
            )
        if self.launch_count < 1:
            raise InvalidOptionError(
                option="launch_count", reason="must be at least 1", value=self.launch_count
            )
        if self.clock_control not in ("base", "none"):
            raise InvalidOptionError(
                option="clock_control", reason="must be 'base' or 'none'", value=self.clock_control
            )
        if not self.section_set and not self.sections:
            raise InvalidOptionError(
                option="sections", reason="name at least one section, or a set", value=self.sections
            )


def graph_trace_args(opts: NsysOptions, extra_args: list[str]) -> list[str]:
    """nsys traces a CUDA graph replay as one range by default: node by node, its kernels are
    listed as kernels (unless the user's own arguments say how)."""
    if "cuda" in opts.trace.split(",") and not any(
        a.startswith("--cuda-graph-trace") for a in extra_args
    ):
        return ["--cuda-graph-trace=node"]
    return []


#: What nsys leaves out of a collection unless the user's ``--nsys-args`` say otherwise: CPU
#: sampling and context switches, which gpumagic's views do not read and which cost seconds of
#: nsys' processing at every capture's end (an H100 pair under ``--nproc 2``: a DDP step 14.3-15.5 s
#: without them, 18.2-20.0 s with them, ``benchmarks/nproc_launch_probe.py``; one process:
#: ``benchmarks/nsys_phases.py --variants``). ``--nsys-args "--sample=process-tree"`` brings them
#: back.
LEAN = {"--sample": "none", "--cpuctxsw": "none"}

#: The switches among ``--nsys-args`` that belong to ``nsys start``, not ``nsys launch`` (nsys
#: 2025.3: those ``nsys start --help`` lists and ``nsys launch --help`` does not, or calls
#: deprecated there), each with its short form: a warm child passes them to each cell's ``nsys
#: start`` (``capture/nsys/warm.py``). Left out: what gpumagic sets itself (``-o``,
#: ``--force-overwrite``, ``--capture-range``, ``--export``, ``--stats``, ``--stop-on-exit``).
START_SWITCHES: dict[str, str | None] = {
    # CPU sampling and context switches (deprecated on `nsys launch`)
    "--sample": "-s",
    "--cpuctxsw": None,
    "--backtrace": "-b",
    "--sampling-period": None,
    "--samples-per-backtrace": None,
    # the collection's other sources
    **dict.fromkeys(
        (
            "--cpu-core-events",
            "--debug-symbols",
            "--event-sample",
            "--event-sampling-frequency",
            "--event-sampling-interval",
            "--flush-on-cudaprofilerstop",
            "--ftrace",
            "--ftrace-keep-user-config",
            "--gpu-metrics-devices",
            "--gpu-metrics-frequency",
            "--gpu-metrics-set",
            "--gpu-video-device",
            "--gpuctxsw",
            "--ib-net-info-devices",
            "--ib-net-info-files",
            "--ib-net-info-output",
            "--nic-metrics",
            "--os-events",
        )
    ),
}
#: The switches that ask for CPU sampling besides ``--sample`` itself.
_SAMPLING = ("--backtrace", "--sampling-period", "--samples-per-backtrace")


def lean_args(extra_args: Sequence[str]) -> list[str]:
    """:data:`LEAN`'s flags that the user's ``extra_args`` do not set themselves. Where the user
    asks for sampling (``--sample`` other than none, or a sampling switch such as
    ``--backtrace``), neither is added: nsys' own defaults stand (context switches follow
    ``--sample``)."""
    given = _given(extra_args)
    if given.get("--sample", "none") != "none" or any(s in given for s in _SAMPLING):
        return []
    return [f"{flag}={value}" for flag, value in LEAN.items() if flag not in given]


def split_start_args(extra_args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``extra_args`` as (``nsys launch``'s, ``nsys start``'s): the :data:`START_SWITCHES` and
    their values (``--sample=none``, ``--sample none``, ``-s none``) go to the second."""
    launch: list[str] = []
    start: list[str] = []
    for name, _, tokens in _switches(extra_args):
        (start if name in START_SWITCHES else launch).extend(tokens)
    return launch, start


def _long(name: str) -> str:
    return next((long for long, short in START_SWITCHES.items() if short == name), name)


def _switches(extra_args: Sequence[str]) -> list[tuple[str, str, list[str]]]:
    """``extra_args`` read as nsys reads them: each switch (by its long name) with its value
    (``--name=VALUE``, or the next argument where that is no switch; "" where none) and the
    arguments it took; an argument that is no switch stands alone, named ""."""
    out: list[tuple[str, str, list[str]]] = []
    args = list(extra_args)
    i = 0
    while i < len(args):
        tokens = [args[i]]
        name, value = "", ""
        if args[i].startswith("-"):
            name, _, value = args[i].partition("=")
            if "=" not in args[i] and i + 1 < len(args) and not args[i + 1].startswith("-"):
                i += 1
                value = args[i]
                tokens.append(value)
        out.append((_long(name), value, tokens))
        i += 1
    return out


def _given(extra_args: Sequence[str]) -> dict[str, str]:
    """The switches ``extra_args`` set, by long name, with their values ("" where none)."""
    return {name: value for name, value, _ in _switches(extra_args) if name}
