"""What each kernel Inductor generated fused: its ATen ops and the graph's source nodes, from the
code it wrote.

A Triton kernel's name lists the ops it fused only in part (``triton_poi_fused_add_gelu_mul_0``;
long lists are cut, and ``config.triton.descriptive_names`` may name them after the module instead).
Inductor writes, above each kernel it defines in its output code, the nodes of the captured graph
the kernel came from and their ATen ops::

    # kernel path: /tmp/torchinductor_u/ab/cab....py # Topologically Sorted Source Nodes: [gelu,
    mul, add], Original ATen: [aten.gelu, aten.mul, aten.add] # Source node to ATen node mapping: #
    add => add triton_poi_fused_add_gelu_mul_0 =
    async_compile.triton('triton_poi_fused_add_gelu_mul_0', '''

The output-code modules the process has loaded are the ones its compiled graphs run, so reading them
after a capture names what each profiled Inductor kernel fused, without compiling anything again or
turning on a debug setting before the user compiled. Read only where ``torch._inductor`` is already
loaded (nothing compiled, nothing to read); kernels of other origin, or code without the comments
(Inductor's C++ backend writes none), are left out and the kernel table falls back to the fused-op
list in the name.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["FusedFrom", "fused_descriptions", "fused_from_loaded_code", "parse_output_code"]

_ORIGINS = re.compile(
    r"^#\s*(?:Topologically Sorted|Unsorted) Source Nodes: \[(?P<nodes>[^\]\n]*)\], "
    r"Original ATen: \[(?P<aten>[^\]\n]*)\]\s*$"
)
_DEFINITION = re.compile(r"^(?P<name>[A-Za-z_]\w*) = async_compile\.\w+\(")


@dataclass(frozen=True)
class FusedFrom:
    """The graph nodes one generated kernel computes and the ATen ops they were (``aten.gelu``,
    ...)."""

    nodes: tuple[str, ...]
    aten: tuple[str, ...]

    def describe(self) -> str:
        parts = []
        if self.aten:
            parts.append("fuses " + ", ".join(self.aten))
        if self.nodes:
            parts.append("graph nodes " + ", ".join(self.nodes))
        return "; ".join(parts)


def _items(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def parse_output_code(source: str) -> dict[str, FusedFrom]:
    """Each kernel defined in one Inductor output-code module, with the origins written above it."""
    found: dict[str, FusedFrom] = {}
    pending: FusedFrom | None = None
    for line in source.splitlines():
        if line.startswith("#"):
            match = _ORIGINS.match(line)
            if match:
                pending = FusedFrom(_items(match["nodes"]), _items(match["aten"]))
            continue
        if pending is not None:
            definition = _DEFINITION.match(line)
            if definition:
                found[definition["name"]] = pending
            pending = None
    return found


def fused_from_loaded_code(kernel_names: Iterable[str]) -> dict[str, FusedFrom]:
    """What the kernels among ``kernel_names`` fused, from the Inductor output code this process has
    loaded."""
    wanted = set(kernel_names)
    codecache = sys.modules.get("torch._inductor.codecache")
    if not wanted or codecache is None:
        return {}
    modules = getattr(getattr(codecache, "PyCodeCache", None), "modules", None) or []
    found: dict[str, FusedFrom] = {}
    for module in list(modules):
        if not wanted.intersection(vars(module)):
            continue  # a kernel is a module attribute of the code that defines it
        try:
            parsed = _parsed_file(module.__file__)
        except (OSError, AttributeError, TypeError, UnicodeDecodeError):
            continue
        found.update({name: origin for name, origin in parsed.items() if name in wanted})
    return found


@lru_cache(maxsize=256)
def _parsed_file(path: str) -> dict[str, FusedFrom]:
    """One output-code file, parsed once per process: Inductor names each file after a hash of its
    contents, so a path never holds other code, and a cell profiled again does not read it again."""
    with open(path, encoding="utf-8") as f:
        return parse_output_code(f.read())


def fused_descriptions(fused: Mapping[str, FusedFrom]) -> dict[str, str]:
    """The plain-text form a trace's meta keeps (it travels in saved reports and subprocess
    results)."""
    return {name: origin.describe() for name, origin in fused.items() if origin.describe()}
