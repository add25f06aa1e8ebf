"""Findings: each names its total, picks its examples by time, and the new transfer and host-wait
findings."""

from __future__ import annotations

from gpumagic.analysis import findings
from gpumagic.trace import Trace, frame

TAIL = "_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
SGEMM_A = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8" + TAIL
SGEMM_Z = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x128x8" + TAIL


def kernel(name, start, dur, corr=0):
    return dict(name=name, start=start, end=start + dur, device=0, stream=7, correlation=corr)


def by_kind(trace):
    return {f.kind: f for f in findings(trace)}


def test_ffma_examples_are_the_kernels_that_hold_the_time():
    # alphabetically the 128x128 'nn' kernel comes first; the 256x128 'tn' one holds 90% of the time
    t = Trace(
        kernels=frame("kernels", [kernel(SGEMM_A, 0, 100_000), kernel(SGEMM_Z, 200_000, 900_000)])
    )
    msg = by_kind(t)["ffma_gemm"].message
    assert "100% of kernel time" in msg
    assert msg.index("256×128") < msg.index("128×128") and "90%" in msg and "10%" in msg


def test_every_share_names_its_total_and_one_kernel_reads_as_one():
    t = Trace(kernels=frame("kernels", [kernel(SGEMM_A, 0, 100_000)]), meta={"label": "c"})
    f = by_kind(t)
    assert (
        f["top_kernels"].message.startswith("One kernel ran: ")
        and "1 time." in f["top_kernels"].message
    )
    assert "of kernel time" in f["ffma_gemm"].message
    many = Trace(
        kernels=frame(
            "kernels", [kernel(SGEMM_A, i * 10, 5) for i in range(3)] + [kernel(SGEMM_Z, 99, 5)]
        )
    )
    assert "kernels by share of kernel time" in by_kind(many)["top_kernels"].message


def test_large_host_device_copies_are_named_with_their_share_of_gpu_busy_time():
    mem = [
        dict(
            kind="HtoD",
            name="Memcpy HtoD",
            bytes=268_435_456,
            start=0,
            end=10_000_000,
            device=0,
            stream=7,
        ),
        dict(
            kind="HtoD",
            name="Memcpy HtoD",
            bytes=268_435_456,
            start=10_000_000,
            end=20_000_000,
            device=0,
            stream=7,
        ),
    ]
    t = Trace(
        kernels=frame("kernels", [kernel(SGEMM_A, 20_000_000, 30_000_000)]),
        memops=frame("memops", mem),
    )
    f = by_kind(t)["host_copies"]
    assert f.numbers["share_of_busy"] == 0.4 and f.numbers["bytes"] == 2 * 268_435_456
    assert "2 HtoD" in f.message and "537 MB" in f.message and "40% of GPU busy time" in f.message
    small = Trace(
        kernels=frame("kernels", [kernel(SGEMM_A, 20_000_000, 300_000_000)]),
        memops=frame("memops", mem),
    )
    assert "host_copies" not in by_kind(small)


def test_host_waits_inside_the_cell_are_found_and_the_captures_own_sync_is_not():
    ks = [kernel(SGEMM_A, i * 1_000_000, 200_000, corr=i) for i in range(3)]
    api = [
        dict(
            name="cudaLaunchKernel",
            start=i * 1_000_000 - 5_000,
            end=i * 1_000_000,
            thread=1,
            correlation=i,
        )
        for i in range(3)
    ]
    api += [
        dict(
            name="cudaStreamSynchronize",
            start=i * 1_000_000 + 10_000,
            end=i * 1_000_000 + 200_000,
            thread=1,
        )
        for i in range(3)
    ]
    api.append(
        dict(name="cudaDeviceSynchronize", start=2_300_000, end=2_400_000, thread=1)
    )  # the capture's own
    nvtx = [
        dict(
            text="cell:s",
            start=-10_000,
            end=2_500_000,
            thread=1,
            domain="",
            style="PushPop",
            depth=0,
        )
    ]
    t = Trace(
        kernels=frame("kernels", ks),
        api=frame("api", api),
        nvtx=frame("nvtx", nvtx),
        meta={"label": "cell:s"},
    )
    f = by_kind(t)["host_sync"]
    assert f.numbers["calls"] == 3 and "cudaStreamSynchronize ×3" in f.message
    assert "of the cell's NVTX range" in f.message
    quiet = Trace(
        kernels=frame("kernels", ks),
        api=frame("api", api[:3] + api[-1:]),
        nvtx=frame("nvtx", nvtx),
        meta={"label": "cell:s"},
    )
    assert "host_sync" not in by_kind(quiet)


def test_copy_advice_is_for_what_made_the_trace():
    """PyTorch's advice for a PyTorch cell (between cells) or program (across steps); a CUDA
    program's own (pinned host memory, cudaMemcpyAsync) for a trace of no PyTorch kernels."""
    mem = [
        dict(
            kind="HtoD",
            name="Memcpy HtoD",
            bytes=1 << 28,
            start=0,
            end=10_000_000,
            device=0,
            stream=7,
        )
    ]
    plain_cuda = Trace(
        kernels=frame("kernels", [kernel("my_saxpy_kernel", 10_000_000, 20_000_000)]),
        memops=frame("memops", mem),
    )
    advice = by_kind(plain_cuda)["host_copies"].message
    assert "cudaMallocHost" in advice and "pin_memory" not in advice and "cells" not in advice
    torch_program = Trace(
        kernels=frame("kernels", [kernel(SGEMM_A, 10_000_000, 20_000_000)]),
        memops=frame("memops", mem),
    )
    torch_program.meta["backend"] = "torch.profiler"
    advice = by_kind(torch_program)["host_copies"].message
    assert "pin_memory" in advice and "across steps" in advice
    torch_program.meta["cell_source"] = "y = model(x.cuda())"
    torch_program._memo.clear()
    assert "between cells" in by_kind(torch_program)["host_copies"].message
