"""gpumagic: how fast is this on the GPU, and why? IPython magics on PyTorch.

``%load_ext gpumagic`` registers ``%gputime``/``%%gputime``. The measuring core works without
IPython: ``gpumagic.gputime("A @ B", globals={...})`` returns the same :class:`TimingResult`;
``gpumagic.compare`` and ``gpumagic.sweep`` are ``%%gputime --compare`` and ``--sweep``. Each saves
its results to the history, as the magics do (``label=``, ``history=False``); ``gpumagic.history()``
lists them, ``gpumagic.plot_history()`` draws them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _moved
from .api.gputime import gputime  # the timing core's gputime, its result saved to the history
from .errors import GpuMagicError
from .timing import TimingOptions, TimingResult

if TYPE_CHECKING:  # loaded on first use (below); named here for type checkers
    from .api.gputime import compare, sweep
    from .kernels import KernelName
    from .kernels import decode as decode_kernel

from .version import __version__ as __version__

_moved.install()  # the old module paths, for one release

__all__ = [
    "GpuMagicError",
    "KernelName",
    "TimingOptions",
    "TimingResult",
    "compare",
    "decode_kernel",
    "diff",
    "gputime",
    "history",
    "load_ipython_extension",
    "load_job",
    "load_memory_snapshot",
    "load_ncu",
    "load_nsys",
    "load_trace",
    "measure_peak",
    "peaks",
    "plot_history",
    "read_job",
    "roofline",
    "sweep",
    "unload_ipython_extension",
]


def __getattr__(name: str) -> Any:
    # The trace readers pull in pandas: imported on first use, so `%load_ext gpumagic` stays quick.
    # The kernel decoder is the larger part of the package: it too loads on first use.
    if name == "KernelName":
        from .kernels import KernelName

        return KernelName
    if name == "decode_kernel":
        from .kernels import decode

        return decode
    if (
        name == "diff"
    ):  # two runs compared (reads files through the capture readers, draws with Bokeh)
        from .api.diff import diff

        return diff
    if (
        name == "load_memory_snapshot"
    ):  # an allocator snapshot: read by capture, analysed, drawn with Bokeh
        from .api.memory import load_memory_snapshot

        return load_memory_snapshot
    if name == "load_trace":
        from .capture.reports import load_trace

        return load_trace
    if name == "load_ncu":
        from .api.ncu import load_ncu

        return load_ncu
    if (
        name == "roofline"
    ):  # timed calls under the datasheet ceilings (a figure: the render layer's)
        from .render.calls_roofline import roofline

        return roofline
    if name == "load_nsys":
        from .capture.reports import load_nsys

        return load_nsys
    if name in ("load_job", "read_job"):  # a job of many ranks, reduced where each rank is read
        from . import job

        return getattr(job, name)
    if (
        name == "compare"
    ):  # the functions (saving to the history), not gpumagic.timing's modules of the same names
        from .api.gputime import compare

        return compare
    if name == "sweep":
        from .api.gputime import sweep

        return sweep
    if (
        name == "history"
    ):  # the package answers the call: gpumagic.history(label=...) is a DataFrame
        from . import history

        return history
    if name == "plot_history":
        from .history import plot_history

        return plot_history
    if name in (
        "peaks",
        "measure_peak",
    ):  # the device peaks table and the measurement of this GPU's own
        from . import device_peaks

        return getattr(device_peaks, name)
    raise AttributeError(f"module 'gpumagic' has no attribute {name!r}")


_MAGIC_NAMES = {"line": ["gputime"], "cell": ["gputime", "gpuprofile"]}


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics and make their settings reachable from ``%config GpuMagics``."""
    from .notebook.magics import GpuMagics  # IPython is imported only when the extension is loaded

    magics = GpuMagics(shell=ipython)
    ipython.register_magics(magics)
    ipython.configurables[:] = [c for c in ipython.configurables if type(c).__name__ != "GpuMagics"]
    ipython.configurables.append(magics)


def unload_ipython_extension(ipython: Any) -> None:
    table = ipython.magics_manager.magics
    for kind, names in _MAGIC_NAMES.items():
        for name in names:
            table[kind].pop(name, None)
    ipython.configurables[:] = [c for c in ipython.configurables if type(c).__name__ != "GpuMagics"]
