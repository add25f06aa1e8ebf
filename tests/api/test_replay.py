"""From a profile's row to a measured fix (``api/replay.py``): the op behind a kernel row is
re-created from its recorded shapes and types and timed as ``%gputime`` times; alternatives are
compared with the user's flags left as found; a row that cannot be replayed says why."""

from __future__ import annotations

import pytest

import gpumagic
from gpumagic.api.replay import ReplayError, replayed_op
from gpumagic.trace import Trace, frame

torch = pytest.importorskip("torch")


def _trace(op: str = "aten::mm", shapes: str = "[64, 32], [32, 16]", types: str = "float, float"):
    """One op launching two calls of a kernel (4 µs each), and a softmax launching another."""
    ops = [
        {"name": op, "start": 0, "end": 100, "thread": 1, "depth": 0, "shapes": shapes}
        | {"dtypes": types},
        {"name": op, "start": 200, "end": 300, "thread": 1, "depth": 0, "shapes": shapes}
        | {"dtypes": types},
        {"name": "aten::_softmax", "start": 400, "end": 500, "thread": 1, "depth": 0}
        | {"shapes": "[64, 32], [], []", "dtypes": "float"},
    ]
    api = [
        {"name": "cudaLaunchKernel", "start": 10 + 200 * i, "end": 20 + 200 * i, "thread": 1}
        | {"correlation": i}
        for i in range(3)
    ]
    names, durs = ["gemm_kernel", "gemm_kernel", "softmax_kernel"], [4000, 4000, 1000]
    kernels = [
        {"name": n, "start": 10_000 * (i + 1), "end": 10_000 * (i + 1) + d, "device": 0}
        | {"stream": 7, "correlation": i}
        for i, (n, d) in enumerate(zip(names, durs))
    ]
    meta = {"device": "CPU", "recorded": ["kernels", "api", "ops"]}
    return Trace(
        kernels=frame("kernels", kernels), api=frame("api", api), ops=frame("ops", ops), meta=meta
    )


def test_the_heaviest_row_is_its_launching_op_with_the_recorded_shapes():
    op = replayed_op(_trace(), 0)
    assert op["op"] == "aten::mm" and op["shapes"] == "[64, 32], [32, 16]"
    assert op["kernel"] == "gemm_kernel" and op["calls"] == 2 and op["kernel_ns"] == 4000
    assert replayed_op(_trace(), "softmax_kernel")["op"] == "aten::_softmax"


def test_a_replay_times_the_op_and_says_what_it_replayed():
    r = gpumagic.replay(_trace(), 0, samples=30)
    assert r.median > 0 and len(r.samples) == 30
    assert any(
        n.startswith("replayed aten::mm ([64, 32], [32, 16]; float, float)") for n in r.notes
    )
    assert any("the row's own kernel time 4 µs per call over 2 calls" in n for n in r.notes)


def test_compare_times_the_alternatives_and_leaves_tf32_as_found():
    before = torch.backends.cuda.matmul.allow_tf32
    got = gpumagic.replay(_trace(), 0, compare=True, samples=20)
    assert list(got.results) == ["as recorded (fp32)", "tf32", "bf16"]
    assert torch.backends.cuda.matmul.allow_tf32 == before
    half = gpumagic.replay(
        _trace(types="c10::BFloat16, c10::BFloat16"), 0, compare=True, samples=10
    )
    assert list(half.results) == ["as recorded (bf16)", "fp16"]


@pytest.mark.parametrize(
    "row, words",
    [
        ("softmax_kernel", "aten::_softmax cannot be replayed from this profile"),
        (7, "row 7 is not in the kernel table (it has 2 rows)"),
        ("nope", "no kernel named 'nope'"),
    ],
)
def test_a_row_that_cannot_be_replayed_says_why(row, words):
    with pytest.raises(ReplayError, match=words.replace("(", r"\(").replace(")", r"\)")):
        gpumagic.replay(_trace(), row)


def test_a_profile_without_shapes_says_how_to_record_them():
    trace = _trace()
    trace.ops = trace.ops.drop(columns=["shapes"])
    with pytest.raises(ReplayError, match="record_shapes=True"):
        gpumagic.replay(trace, 0)
