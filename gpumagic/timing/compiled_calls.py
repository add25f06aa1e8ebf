"""Counting a statement's work without touching the code ``torch.compile`` made of it.

The work count runs one call of the statement under a ``TorchDispatchMode``. Inside a frame that
dynamo compiled, that is fatal to the user's program, not to the count: dynamo's frame callback sees
the mode, declines to run the compiled graph and marks the frame to be skipped, and the model runs
eager for as long as the process lives (a profile of ``m(v)`` after one ``%gputime m(v)`` showed
``aten::gelu`` and no "Torch-Compiled Region"; dynamo then fails at interpreter exit with
``KeyError: '__builtins_dict___0'``).

:func:`outside_dynamo` is the context the count runs in instead. Where ``torch._dynamo`` has been
imported (the only way compiled code can exist), it sets dynamo's ``force_eager`` stance for the one
call: compiled functions and modules run their own Python source, dynamo's frame callback is not
installed, so no cache entry is read, added or marked skipped, and no compile starts (the stance is
restored on exit, whatever the call did). While it is on, a profile function watches for dynamo's
compiled-call wrappers and records each *outermost* compiled call with its inputs (arguments, and a
compiled module's parameters and buffers) and outputs: what the compiled graph reads and writes at
least once. :mod:`.work` counts the bytes of a compiled statement at that level, as the fused
kernels move them, not the eager decomposition's; FLOPs (matmul, convolution, attention) are the
same math either way.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Literal

from ..capture.marks.compiled_functions import is_compiled_function
from ..edges import TorchValue, UserValue
from .work_counters import _tensors, _traffic

__all__ = ["CompiledCalls", "DynamoCannotStandAside", "compiled_objects", "outside_dynamo"]

#: Where dynamo's wrapper of every compiled function and module call is defined: a closure over its
#: ``OptimizeContext``, named ``_fn`` in some releases and ``compile_wrapper`` in others, so it is
#: told by what it holds, not by its name.
_WRAPPER_FILE_SUFFIX = ("_dynamo/eval_frame.py", "_dynamo\\eval_frame.py")
#: The events a profile function (``sys.setprofile``) is called with.
_ProfileEvent = Literal["call", "return", "c_call", "c_return", "c_exception"]


class DynamoCannotStandAside(RuntimeError):
    """This PyTorch cannot run compiled code from its source for one call: the work is not counted,
    and says why."""


@dataclass
class CompiledCalls:
    """The outermost compiled calls one call of a statement made, and the bytes they read and wrote:
    a tensor's bytes as the op counter counts them (``work_counters._traffic``: each distinct tensor
    once, an expanded one by its footprint)."""

    calls: int = 0
    names: list[str] = field(default_factory=list)
    bytes_read: int = 0
    bytes_written: int = 0
    #: what the op counter counted inside the compiled calls (read, written): the eager
    #: decomposition's traffic, which the compiled calls' own bytes replace
    inside: tuple[int, int] = (0, 0)
    #: reads the op counter's running (read, written) totals, so the traffic inside compiled calls
    #: can be told apart
    probe: Callable[[], tuple[int, int]] | None = None
    _frames: list[FrameType] = field(default_factory=list)
    _at_entry: tuple[int, int] = (0, 0)

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def entered(self, frame: FrameType) -> None:
        self._frames.append(frame)
        if len(self._frames) > 1:
            return  # a compiled call inside a compiled call is part of the outer graph
        import torch

        local = frame.f_locals
        fn: UserValue = local.get("fn")  # what the user handed torch.compile: a function, a module
        wrapped = inspect.unwrap(fn)  # under dynamo's functools.wraps wrappers: the user's callable
        inputs: list[Any] = [local.get("args", ()), local.get("kwargs", {})]  # Any: torch values
        owner = getattr(wrapped, "__self__", wrapped)
        if isinstance(owner, torch.nn.Module):
            inputs += [list(owner.parameters()), list(owner.buffers())]
        self.calls += 1
        self.names.append(_name_of(wrapped))
        self.bytes_read += _traffic(_tensors(inputs), [])[0]
        if self.probe is not None:
            self._at_entry = self.probe()

    def returned(self, value: TorchValue) -> None:  # the compiled call's torch value
        """The innermost compiled call under way returned ``value``."""
        self._frames.pop()
        if not self._frames:
            self.bytes_written += _traffic([], _tensors(value))[1]
            if self.probe is not None:
                read, written = self.probe()
                self.inside = (
                    self.inside[0] + read - self._at_entry[0],
                    self.inside[1] + written - self._at_entry[1],
                )


def _name_of(wrapped: UserValue) -> str:  # the user's compiled function or module
    owner = getattr(wrapped, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        return type(owner).__name__
    return getattr(wrapped, "__qualname__", None) or type(wrapped).__name__  # a module: its class


def _is_compiled_wrapper(frame: FrameType) -> bool:
    if (
        not frame.f_code.co_filename.endswith(_WRAPPER_FILE_SUFFIX)
        or "fn" not in frame.f_code.co_freevars
    ):
        return False
    try:
        from torch._dynamo.eval_frame import OptimizeContext
    except ImportError:
        return False
    local = frame.f_locals
    return "args" in local and isinstance(local.get("self"), OptimizeContext)


@contextlib.contextmanager
def outside_dynamo(probe: Callable[[], tuple[int, int]] | None = None) -> Iterator[CompiledCalls]:
    """Run the block with dynamo standing aside, recording the outermost compiled calls it makes.

    ``probe`` reads the op counter's running (read, written) byte totals (see
    :attr:`CompiledCalls.inside`). A no-op where ``torch._dynamo`` was never imported: nothing can
    be compiled, and importing it here would cost seconds. Compiled calls are not watched (``calls``
    stays 0) where another profile function that cannot be chained is active. Restores dynamo's
    stance and the thread's profile function on exit.
    """
    seen = CompiledCalls(probe=probe)
    if "torch._dynamo" not in sys.modules:
        yield seen
        return
    import torch

    if not hasattr(
        torch.compiler, "set_stance"
    ):  # PyTorch before 2.6: no way to run compiled code from source
        raise DynamoCannotStandAside(
            "work not counted: this PyTorch has no torch.compiler.set_stance (2.6 and "
            "later), and counting a statement "
            "that may call compiled code under a dispatch mode would make dynamo skip that "
            "code for good"
        )
    previous = sys.getprofile()
    chained = previous if callable(previous) else None

    def watch(frame: FrameType, event: _ProfileEvent, arg: object) -> None:  # as sys.setprofile
        if event == "call" and _is_compiled_wrapper(frame):
            seen.entered(frame)
        elif event == "return" and seen._frames and frame is seen._frames[-1]:
            seen.returned(arg)
        if chained is not None:
            chained(frame, event, arg)

    watching = previous is None or chained is not None
    with torch.compiler.set_stance("force_eager"):
        if watching:
            sys.setprofile(watch)
        try:
            yield seen
        finally:
            if watching:
                sys.setprofile(previous)


def is_compiled(obj: object) -> bool:
    """Whether ``obj`` is what ``torch.compile`` returned: a compiled module (``OptimizedModule``)
    or a compiled function (dynamo's wrapper keeps the original as ``_torchdynamo_orig_callable``).
    Without ``torch._dynamo`` imported nothing can be compiled, and nothing is imported here."""
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    if dynamo is None:
        return False
    module_type = getattr(dynamo, "OptimizedModule", None)
    if module_type is not None and isinstance(obj, module_type):
        return True
    return is_compiled_function(obj)


def compiled_objects(names: Iterable[str], namespace: Mapping[str, object] | None) -> list[str]:
    """Which of the ``names`` a statement reads are bound in ``namespace`` to compiled code: a
    statement that calls them runs compiled code, whether or not its work was counted (the work
    count's own evidence, :class:`CompiledCalls`, needs ``work=True``)."""
    if namespace is None or "torch._dynamo.eval_frame" not in sys.modules:
        return []
    return sorted(n for n in names if n in namespace and is_compiled(namespace[n]))
