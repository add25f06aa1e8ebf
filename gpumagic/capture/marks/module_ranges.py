"""Each ``nn.Module`` forward of the cell's models marked in the trace, named as the code names it,
for the by-module view.

torch.profiler records an eager module's forward only through its Python tracer (``with_stack``:
``with_modules`` alone is TorchScript's), which traces every Python call: +12% on an H100 training
step that the host paces, +5.7% and +11.8% on two such steps on an H200, where these ranges and the
cell's line ranges cost +1.3% and +7.0% (``benchmarks/by_code_cost.py``). A range per module call
(about 1.5 µs, ``cell_lines.fast_range``): a forward pre-hook opens a range named
``gpumagic module <Class>_<k> <dotted name>`` and a forward hook closes it, on the modules that
the namespace's models hold. The hooks are put on for the capture only and removed after it (the
modules are left as found); a range left open by a forward that raised is closed then too.

A ``torch.compile``d model (an ``OptimizedModule``, or a module compiled in place) gets one range,
around its call, and no hooks on the modules inside it, also where the namespace holds the eager
model too: hooks there would be traced into its graph (a recompile inside the capture). Its
kernels go to it as one module. Where the namespace holds a compiled function, no eager model is
marked: the function may call any of them, and their hooks would be traced into its graph.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ...edges import TorchValue
from .cell_lines import fast_range
from .compiled_functions import is_compiled_function

__all__ = ["MODULE_RANGE_TEXT", "module_ranges", "roots_of"]

#: The range's name: a token of the class and a number (unique in the capture, no dots: the view's
#: tree paths join tokens with dots) and the dotted name the code uses.
MODULE_RANGE_TEXT = "gpumagic module {} {}"


def roots_of(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The namespace's models: its ``nn.Module`` values under names that do not start with ``_``
    (IPython's ``_``, ``_3``, ``__`` are outputs), each object once."""
    import torch

    seen: set[int] = set()
    out = {}
    for key, value in namespace.items():
        if key.startswith("_") or not isinstance(value, torch.nn.Module) or id(value) in seen:
            continue
        seen.add(id(value))
        out[key] = value
    return out


def _named(roots: Mapping[str, Any]) -> list[tuple[Any, str, str]]:
    """(module, token, dotted name) of every module to mark: each root's own modules (a compiled
    one's wrapper only), each module once. With one root its modules are named as under it
    (``blocks.1.attn``); with several, after their root (``model.blocks.1.attn``); a root by its
    key."""
    numbers: dict[str, int] = defaultdict(int)
    # what compiled code runs is left alone: a hook there would be traced into its graph
    seen: set[int] = {
        id(m)
        for root in roots.values()
        if _compiled(root)
        for m in getattr(root, "_orig_mod", root).modules()
    }
    out = []
    for key, root in roots.items():
        compiled = _compiled(root)
        if compiled:  # the wrapper's call runs outside its graph; an in-place one's does not
            pairs = [("", root)] if type(root).__name__ == "OptimizedModule" else []
        else:
            pairs = list(root.named_modules())
        for name, mod in pairs:
            if id(mod) in seen and not (compiled and not name):
                continue
            seen.add(id(mod))
            cls = type(mod).__name__
            token = f"{cls}_{numbers[cls]}"
            numbers[cls] += 1
            under = f"{key}.{name}" if len(roots) > 1 else name
            out.append((mod, token, under if name else key))
    return out


def _compiled(module: TorchValue) -> bool:
    """A ``torch.compile``d model: the wrapper ``torch.compile(model)`` returns, or a module
    compiled in place (``model.compile()``)."""
    return (
        type(module).__name__ == "OptimizedModule"
        or getattr(module, "_compiled_call_impl", None) is not None
    )


def _compiled_function_in(namespace: Mapping[str, Any]) -> bool:
    """Whether the namespace holds a ``torch.compile``d function (dynamo's wrapper keeps the
    original as ``_torchdynamo_orig_callable``): the eager models it calls are traced into its
    graph, hooks and all, so a hook put on them would recompile it inside the capture and leave a
    second cache entry behind."""
    if "torch._dynamo.eval_frame" not in sys.modules:
        return False
    import torch

    return any(
        is_compiled_function(value)
        for key, value in namespace.items()
        if not key.startswith("_") and not isinstance(value, torch.nn.Module)
    )


@contextmanager
def module_ranges(namespace: Mapping[str, Any]) -> Iterator[None]:
    """Inside the block, each forward of the namespace's models runs in its range (module doc);
    every hook removed, and any range left open closed, when the block ends."""
    open_: list[Any] = []
    handles = []

    def hooks(text: str) -> tuple[Any, Any]:
        def pre(_module: TorchValue, _args: tuple[TorchValue, ...]) -> None:
            rf = fast_range(text)
            rf.__enter__()
            open_.append(rf)

        def post(_module: TorchValue, _args: tuple[TorchValue, ...], _out: TorchValue) -> None:
            if open_:
                open_.pop().__exit__(None, None, None)

        return pre, post

    roots = roots_of(namespace)
    if _compiled_function_in(namespace):  # it may call any eager model: leave them all alone
        roots = {k: m for k, m in roots.items() if _compiled(m)}
    try:
        for mod, token, dotted in _named(roots):
            pre, post = hooks(MODULE_RANGE_TEXT.format(token, dotted))
            handles.append(mod.register_forward_pre_hook(pre))
            handles.append(mod.register_forward_hook(post, always_call=True))
        yield
    finally:
        for h in handles:
            h.remove()
        while open_:
            open_.pop().__exit__(None, None, None)
