"""Where an allocation came from, read off its Python stack: the user's line, the op, and what kind
of code made it.

A stack is torch's list of frames for the allocation, innermost first; the C++ frames that
``stacks="all"`` (PyTorch's default) mixes in are left out first. Three readings, each once per
distinct stack (a million allocations share a few thousand stacks):

- **the user's line**: the innermost frame outside PyTorch and installed packages (anything under
  ``torch/``, ``site-packages``/``dist-packages``, the standard library, the code ``torch.compile``
  generates in ``torchinductor_*``, IPython and gpumagic themselves); a cell's line where the code
  was typed in a notebook.
- **the op**: the innermost frame inside PyTorch, named by its module and function
  (``torch.nn.functional.gelu``), which is where the tensor was made; the user's own function where
  PyTorch is not on the stack.
- **the kind of code** (:data:`KINDS`), which the categories start from (:mod:`.memory`):
  ``optimizer`` (a frame in ``torch/optim``); ``backward`` (no Python frames at all: the autograd
  engine runs a CUDA backward on a thread of its own, with no Python stack; or ``backward``/``grad``
  of ``torch/autograd`` or ``Tensor.backward``, or a compiled graph's backward in
  ``_functorch/_aot_autograd``; not ``autograd.Function.apply``, which runs forwards);
  ``parameters`` (module construction and moves: ``torch/nn/init``, ``torch/nn/parameter``,
  ``Module.to``/``cuda``/``_apply``/``reset_parameters``); ``inputs`` (a frame in
  ``torch/utils/data``: the data loader, its collate and pinning); else ``forward``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["KINDS", "Site", "short_path", "site_of"]

#: The kinds of code an allocation can come from (see the module's docstring).
KINDS = ("forward", "backward", "optimizer", "parameters", "inputs")

_NOT_USER = re.compile(
    r"(^|[\\/])(torch|site-packages|dist-packages|IPython|ipykernel|gpumagic|torchinductor_[^\\/]*)[\\/]"
    r"|[\\/]lib[\\/]python3[^\\/]*[\\/]|^<frozen |^<built-in|^<string>$"
)
_BACKWARD_FUNCS = {"backward", "grad", "_engine_run_backward", "_make_grads", "run_backward"}
_PARAM_FUNCS = {
    "_apply",
    "to",
    "cuda",
    "reset_parameters",
    "__init__",
    "_load_from_state_dict",
    "load_state_dict",
}


@dataclass(frozen=True)
class Site:
    """What one stack says: ``line`` ("file:line in function", the user's innermost frame; ""
    when none), ``op`` (where the tensor was made), ``kind`` (one of :data:`KINDS`) and ``users``
    (every user frame, innermost first, as ``line`` spells it: where a backward is named after the
    line that called the forward, :mod:`.memory_backward`)."""

    line: str
    op: str
    kind: str
    users: tuple[str, ...] = ()


def short_path(filename: str) -> str:
    """A file name short enough for a table: a notebook cell as it is, else the last two parts of
    the path."""
    parts = re.split(r"[\\/]", filename)
    return "/".join(parts[-2:]) if len(parts) > 2 else filename


def _is_user(filename: str) -> bool:
    return not _NOT_USER.search(filename)


def _torch_module(filename: str) -> str | None:
    """``torch.nn.functional`` for ``.../site-packages/torch/nn/functional.py`` (the last ``torch/``
    in the path: PyTorch may itself live under a directory named torch); None outside PyTorch."""
    path = filename.replace("\\", "/")
    at = path.rfind("/torch/")
    if at < 0 or not path.endswith(".py"):
        return None
    mod = path[at + 7 : -3].replace("/", ".")
    return "torch" if mod == "__init__" else "torch." + mod.removesuffix(".__init__")


def _kind(frames: Sequence[tuple[str, int, str]]) -> str:
    if not frames:
        return "backward"
    kind = "forward"
    for filename, _, name in frames:
        path = filename.replace("\\", "/")
        if "/torch/optim/" in path:
            return "optimizer"
        if name in _BACKWARD_FUNCS and (
            "/torch/autograd/" in path or path.endswith("/torch/_tensor.py")
        ):
            return "backward"
        if "_aot_autograd" in path and "backward" in name:
            return "backward"
        if "/torch/utils/data/" in path:
            return "inputs"
        if (
            "/torch/nn/init" in path
            or "/torch/nn/parameter" in path
            or ("/torch/nn/modules/" in path and name in _PARAM_FUNCS)
        ):
            kind = "parameters"
    return kind


def _is_python(frame: tuple[str, int, str]) -> bool:
    """A Python frame (a ``.py`` file, or a ``<...>`` one such as an IPython input), not a C++
    frame, which ``stacks="all"`` mixes in (``??``, a ``.cpp`` file, or no file, all at line 0)."""
    filename = frame[0]
    return filename.endswith(".py") or (filename.startswith("<") and frame[1] > 0)


def site_of(frames: Sequence[tuple[str, int, str]]) -> Site:
    """The :class:`Site` of one stack (frames innermost first; C++ frames are skipped, so a stack of
    C++ frames alone reads as one with no Python stack)."""
    frames = [f for f in frames if _is_python(f)]
    line, op = "", ""
    users = tuple(f"{short_path(f[0])}:{f[1]} in {f[2]}" for f in frames if _is_user(f[0]))
    for filename, lineno, name in frames:
        if not op and (
            "torchinductor_" in filename or "/torch/_inductor/" in filename.replace("\\", "/")
        ):
            op = "torch.compile graph"
        if not op:
            mod = _torch_module(filename)
            if (
                mod is not None
                and not mod.startswith("torch._")
                and not mod.startswith("torch.utils._")
            ):
                op = f"{mod}.{name}" if name not in ("<module>",) else mod
        if _is_user(filename):
            line = f"{short_path(filename)}:{lineno} in {name}"
            if not op:
                op = name
            break
    if not op and frames:
        op = frames[0][2]
    if not frames:
        op = "autograd engine (no Python stack)"
    return Site(line=line, op=op, kind=_kind(frames), users=users)
