"""gpumagic: how fast is this on the GPU, and why? IPython magics on PyTorch.

``%load_ext gpumagic`` registers ``%gputime``/``%%gputime``. The measuring core works without
IPython: ``gpumagic.gputime("A @ B", globals={...})`` returns the same :class:`TimingResult`;
``gpumagic.compare`` and ``gpumagic.sweep`` are ``%%gputime --compare`` and ``--sweep``. Each saves
its results to the history, as the magics do (``label=``, ``history=False``); ``gpumagic.history()``
lists them, ``gpumagic.plot_history()`` draws them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import GpuMagicError

if TYPE_CHECKING:  # loaded on first use (below); named here for type checkers
    from .api.gputime import compare, gputime, sweep
    from .edges import Shell
    from .kernels import KernelName
    from .kernels import decode as decode_kernel
    from .timing import TimingOptions, TimingResult

from .version import __version__ as __version__

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
    "replay",
    "roofline",
    "sweep",
    "unload_ipython_extension",
]


#: Public names loaded on first use: (module, its name there; None: the module itself). The trace
#: readers pull in pandas and the kernel decoder is the larger part of the package, so
#: ``%load_ext gpumagic`` stays quick; and the processes the tools run the cell in
#: (``python -m gpumagic.capture.child.runner`` and its kin) import the package first: with the
#: timing core eager there, each paid for pandas (0.3-0.7 s) before its first line.
_LAZY: dict[str, tuple[str, str | None]] = {
    # the timing core's gputime, its result saved to the history
    "gputime": ("api.gputime", "gputime"),
    "TimingOptions": ("timing", "TimingOptions"),
    "TimingResult": ("timing", "TimingResult"),
    "KernelName": ("kernels", "KernelName"),
    "decode_kernel": ("kernels", "decode"),
    # two runs compared: reads files through the capture readers, draws with Bokeh
    "diff": ("api.diff", "diff"),
    # an allocator snapshot: read by capture, analysed, drawn with Bokeh
    "load_memory_snapshot": ("api.memory", "load_memory_snapshot"),
    "load_trace": ("job.reports", "load_trace"),
    "load_nsys": ("job.reports", "load_nsys"),
    "load_ncu": ("api.ncu", "load_ncu"),
    # a job of many ranks, reduced where each rank is read
    "read_job": ("job", "read_job"),
    "load_job": ("job", "load_job"),
    # a profile's row re-created and timed (the capture's shapes -> %gputime)
    "replay": ("api.replay", "replay"),
    # timed calls under the datasheet ceilings (a figure: the render layer's)
    "roofline": ("render.calls_roofline", "roofline"),
    # the functions that save to the history, not gpumagic.timing's modules of the same names
    "compare": ("api.gputime", "compare"),
    "sweep": ("api.gputime", "sweep"),
    # the package answers the call: gpumagic.history(label=...) is a DataFrame
    "history": ("history", None),
    "plot_history": ("history", "plot_history"),
    # the device peaks table and the measurement of this GPU's own
    "peaks": ("device_peaks", "peaks"),
    "measure_peak": ("device_peaks", "measure_peak"),
}


def __getattr__(name: str) -> Any:
    # importlib, not ``from . import``: that form would ask this function for the name again
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'gpumagic' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    found = importlib.import_module(f"{__name__}.{module}")
    return found if attribute is None else getattr(found, attribute)


def __dir__() -> list[str]:
    # the names loaded on first use are the package's too: tab completion offers them
    return sorted(set(globals()) | set(__all__))


_MAGIC_NAMES = {"line": ["gputime"], "cell": ["gputime", "gpuprofile"]}


def load_ipython_extension(ipython: Shell) -> None:
    """Register the magics and make their settings reachable from ``%config GpuMagics``."""
    from .notebook.magics import GpuMagics  # IPython is imported only when the extension is loaded

    magics = GpuMagics(shell=ipython)
    ipython.register_magics(magics)
    ipython.configurables[:] = [c for c in ipython.configurables if type(c).__name__ != "GpuMagics"]
    ipython.configurables.append(magics)


def unload_ipython_extension(ipython: Shell) -> None:
    table = ipython.magics_manager.magics
    for kind, names in _MAGIC_NAMES.items():
        for name in names:
            table[kind].pop(name, None)
    ipython.configurables[:] = [c for c in ipython.configurables if type(c).__name__ != "GpuMagics"]
