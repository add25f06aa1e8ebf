"""What ``torch.compile`` returned for a function: dynamo's wrapper, which keeps the original as
``_torchdynamo_orig_callable``. Told without importing torch: where ``torch._dynamo`` is not
loaded nothing can have been compiled. One check for the places that must not disturb compiled
code (``capture.marks.module_ranges``) or must not advise compiling it again (``timing``)."""

from __future__ import annotations

import sys

from ...edges import UserValue

__all__ = ["is_compiled_function"]


def is_compiled_function(obj: UserValue) -> bool:
    """Whether ``obj`` is a ``torch.compile``d function (or any object dynamo wrapped the same
    way); an object whose attribute lookup raises is not."""
    if "torch._dynamo.eval_frame" not in sys.modules:
        return False
    try:
        return getattr(obj, "_torchdynamo_orig_callable", None) is not None
    except Exception:  # noqa: BLE001 - a lookup that raises: not compiled code
        return False
