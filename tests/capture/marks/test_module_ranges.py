"""The by-module view's hooks: put on the namespace's eager models for the capture only, never
where compiled code could trace them (a recompile inside the capture, a cache entry left behind)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpumagic.capture.marks.module_ranges import module_ranges  # noqa: E402


def hooked(m: torch.nn.Module) -> int:
    return sum(len(x._forward_pre_hooks) + len(x._forward_hooks) for x in m.modules())


def test_eager_models_are_marked_for_the_block_only():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with module_ranges({"model": model}):
        assert hooked(model) == 2 * 3  # the Sequential and its two children, a pair each
        model(torch.ones(2, 4))
    assert hooked(model) == 0


def test_no_eager_model_is_marked_beside_a_compiled_function():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())

    def step(x):
        return model(x).sum()

    compiled_step = torch.compile(step)
    with module_ranges({"model": model, "compiled_step": compiled_step}):
        assert hooked(model) == 0  # the function may call it: hooks would be traced
    with module_ranges({"model": model, "step": step}):
        assert hooked(model) == 6  # a plain function calls it eager: marked
    assert hooked(model) == 0
