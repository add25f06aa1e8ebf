"""Modules that moved in 0.2 keep importing from their old paths for one release, with a
DeprecationWarning.

Why a finder and not a file per old path: the package root would again list two dozen modules, which
is what the move was for. The finder answers only the names below, hands back the module from its
new home (one module object, so a patch of either name patches both) and says where it lives now.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

#: old import path -> where the module lives now
MOVED: dict[str, str] = {
    "gpumagic.summaries": "gpumagic.trace.summaries",
    "gpumagic.records": "gpumagic.trace.coverage",
    "gpumagic.windows": "gpumagic.trace.window",
    "gpumagic.intervals": "gpumagic.trace.intervals",
    "gpumagic.chrome_export": "gpumagic.trace.chrome_export",
    "gpumagic.launching_ops": "gpumagic.trace.launching_ops",
    "gpumagic.collectives": "gpumagic.trace.collectives",
    "gpumagic.device_caps": "gpumagic.trace.device_caps",
    "gpumagic.cupti_direct": "gpumagic.gpu_activity.cupti_direct",
    "gpumagic.profiler_start": "gpumagic.gpu_activity.profiler_start",
    "gpumagic.statement": "gpumagic.timing.statement",
    "gpumagic.stats": "gpumagic.timing.stats",
    "gpumagic.magics": "gpumagic.notebook.magics",
    "gpumagic.config": "gpumagic.notebook.config",
    "gpumagic.cell_syntax": "gpumagic.notebook.cell_syntax",
    "gpumagic.memory_profile": "gpumagic.notebook.memory_magic",
    "gpumagic.run_diff": "gpumagic.api.diff",
    "gpumagic.ncu_loader": "gpumagic.api.ncu",
    "gpumagic.history.recorded": "gpumagic.api.gputime",
    "gpumagic.history.cli": "gpumagic.cli.history",
    "gpumagic.history.diff_cli": "gpumagic.cli.diff",
    "gpumagic.history.recorder": "gpumagic.history.saving",
    "gpumagic.timing.records": "gpumagic.timing.steps",
    "gpumagic.timing.comparison": "gpumagic.timing.compare_result",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}: import it from there ({spec.name} stops "
            f"working in 0.3)",
            DeprecationWarning,
            stacklevel=3,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:  # the new module has run already
        pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None):
        new = MOVED.get(name)
        return importlib.util.spec_from_loader(name, _Alias(new)) if new else None


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (importing gpumagic does this)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
