"""gpumagic.diff on committed real pairs: kernels matched by what they are, rows that reconcile
exactly to the change in GPU busy time, ranks compared rank by rank, the sentences, the page, and
``python -m gpumagic diff``'s exit codes."""

from __future__ import annotations

import json
import pathlib

import pandas as pd
import pytest

import gpumagic
from gpumagic import load_nsys, load_trace
from gpumagic.analysis.diff import diff_summaries
from gpumagic.analysis.diff_match import identity, match_kernels
from gpumagic.analysis.profile_summary import ProfileSummary, summarize
from gpumagic.cli.diff import main as diff_main
from gpumagic.render.report import ProfileReport
from gpumagic.trace import Trace, frame

from ..helpers import DATA

TORCH = {"matmul": DATA / "torch_matmul_4096.json.gz", "block": DATA / "torch_block.json.gz"}
FFMA = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"  # noqa: E501
# what cuBLAS ran for the same matmul with TF32 allowed, on the H100 (tests/data/kernel_names.json)
TF32 = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"  # noqa: E501 (a kernel name as it ran)
NVJET = "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT"
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >"
    "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
)


@pytest.fixture(scope="module")
def nsys(committed_nsys, per_rank_nsys) -> dict[str, str]:
    """The committed nsys exports by name, the per-rank job's two as ``rank0`` and ``rank1``."""
    paths = {name: committed_nsys(name) for name in ("matmul", "block", "straggler2", "ddp2")}
    return paths | {f"rank{r}": str(per_rank_nsys / f"rank{r}.sqlite") for r in (0, 1)}


def reconciles(d) -> None:
    """The rows add up exactly to the change in GPU busy, which is the Traces' own GPU busy
    difference."""
    rows = d.data.rows
    assert int(rows["delta_ns"].sum()) == d.data.busy_b - d.data.busy_a
    assert int(rows["ns_a"].sum()) == d.data.busy_a and int(rows["ns_b"].sum()) == d.data.busy_b


# --- every kind of input, and the totals
# ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "pair",
    [("matmul", "block"), ("block", "matmul")],
)
def test_torch_traces_reconcile_to_the_traces_gpu_busy(pair):
    ta, tb = (load_trace(TORCH[p]) for p in pair)
    d = gpumagic.diff(ta, tb)
    reconciles(d)
    assert (d.data.busy_a, d.data.busy_b) == (ta.gpu_busy_ns(), tb.gpu_busy_ns())


def test_nsys_exports_reconcile_memops_and_overlap_included(nsys):
    ta, tb = load_nsys(nsys["matmul"]), load_nsys(nsys["block"])
    d = gpumagic.diff(nsys["matmul"], nsys["block"])  # paths: read through the narrow columns
    reconciles(d)
    assert (d.data.busy_a, d.data.busy_b) == (ta.gpu_busy_ns(), tb.gpu_busy_ns())
    kinds = set(d.data.rows["kind"])
    assert {"kernel", "memop"} <= kinds
    # the same from the Traces (the whole tables): the same rows
    full = gpumagic.diff(ta, tb)
    cols = ["kind", "name_a", "name_b", "calls_a", "calls_b", "ns_a", "ns_b", "match"]
    pd.testing.assert_frame_equal(d.data.rows[cols], full.data.rows[cols])
    gemm = d.data.rows.iloc[0]
    assert gemm["match"] == "same" and (gemm["calls_a"], gemm["calls_b"]) == (3, 6)


def test_a_report_a_trace_a_path_and_a_saved_summary_are_the_same_run(tmp_path):
    trace = load_trace(TORCH["block"])
    saved = json.loads(json.dumps(summarize(trace).to_dict()))  # as the history would keep it
    runs = [ProfileReport(load_trace(TORCH["block"])), trace, str(TORCH["block"]), saved]
    busy = {gpumagic.diff(TORCH["matmul"], run).data.busy_b for run in runs}
    assert busy == {trace.gpu_busy_ns()}
    back = ProfileSummary.from_dict(saved)
    assert back.kernels["ns"].sum() == summarize(trace).kernels["ns"].sum()


def test_torch_and_nsys_spellings_of_one_kernel_match_exactly(nsys):
    d = gpumagic.diff(TORCH["block"], nsys["block"])
    reconciles(d)
    k = d.data.kernels
    both = k[k["match"] == "same"]
    # every kernel of the torch.profiler trace is in the nsys export (which also holds the warm-up's
    # kernels)
    assert set(k.loc[k["ns_a"] > 0, "match"]) == {"same"}
    assert len(both) == 7
    assert "capture: torch.profiler \u2192 nsys" in d.environment


def test_identity_ignores_spelling_not_template_arguments():
    torch_name = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
    )
    nsys_name = (
        "void at::native::vectorized_elementwise_kernel<(int)4, "
        "at::native::CUDAFunctor_add<float>, "
        "std::array<char *, (unsigned long)3>>(int, T2, T3)"
    )
    assert identity(torch_name) == identity(nsys_name)
    assert identity(torch_name) != identity(torch_name.replace("<4,", "<2,"))


# --- matching
# --------------------------------------------------------------------------------------------------
def _trace(kernels: list[tuple[str, int]], ops: list[tuple[str, str]] | None = None) -> Trace:
    """Kernels back to back (name, ns); each launched by an op (name, shapes) when ``ops`` is
    given."""
    rows, api, op_rows, t = [], [], [], 0
    for i, (name, ns) in enumerate(kernels):
        rows.append(
            dict(
                name=name,
                start=t + 1000,
                end=t + 1000 + ns,
                device=0,
                stream=7,
                correlation=i,
                pid=1,
            )
        )
        api.append(
            dict(name="cudaLaunchKernel", start=t + 10, end=t + 20, thread=1, correlation=i, pid=1)
        )
        if ops:
            op_rows.append(
                dict(name=ops[i][0], start=t, end=t + 30, thread=1, depth=0, shapes=ops[i][1])
            )
        t += ns + 2000
    tables = {"kernels": frame("kernels", rows), "api": frame("api", api)}
    if ops:
        tables["ops"] = frame("ops", op_rows)
    return Trace(meta={"device": "NVIDIA H100 80GB HBM3", "backend": "torch.profiler"}, **tables)


def test_a_gemm_whose_library_picked_another_kernel_is_one_changed_row():
    """fp32 on CUDA cores -> TF32 on tensor cores, no ops recorded: the same op (GEMM) in launch
    order."""
    a = _trace([(FFMA, 52_900_000), (ADD, 1000)])
    b = _trace([(TF32, 14_100_000), (ADD, 1000)])
    d = gpumagic.diff(a, b)
    reconciles(d)
    k = d.data.kernels
    assert len(k) == 2 and set(k["match"]) == {"loose", "same"}
    gemm = k[k["match"] == "loose"].iloc[0]
    assert (gemm["name_a"], gemm["name_b"], gemm["ns_a"], gemm["ns_b"]) == (
        FFMA,
        TF32,
        52_900_000,
        14_100_000,
    )
    assert gemm["how"] == "same kind of work, in launch order"
    first = d.changes[0]
    assert (
        first.startswith("cuBLAS FP32 GEMM (FFMA)")
        and "52.9 ms \u2192" in first
        and "14.1 ms: TF32 enabled" in first
    )
    assert any("precision" in e and "tf32" in e for e in d.environment)


def test_the_launching_op_and_its_shapes_match_before_the_launch_order():
    """Two GEMMs swap their order in B: the op and shapes, not the order, say which is which."""
    big, small = ("aten::mm", "[[4096, 4096], [4096, 4096]]"), ("aten::mm", "[[64, 64], [64, 64]]")
    a = _trace([(FFMA, 50_000_000), (FFMA.replace("256x128x8", "64x64x8"), 10_000)], [big, small])
    b = _trace([(NVJET, 9_000), (TF32, 14_000_000)], [small, big])
    k = gpumagic.diff(a, b).data.kernels
    pairs = {(r["ns_a"], r["ns_b"]) for _, r in k.iterrows()}
    assert pairs == {(50_000_000, 14_000_000), (10_000, 9_000)}
    assert set(k["how"]) == {"same launching op and input shapes"}


def test_unmatched_kernels_are_new_and_vanished():
    a = pd.DataFrame(
        {
            "rank": "",
            "name": ["triton_poi_fused_add_0"],
            "calls": 1,
            "ns": 5,
            "first": 0,
            "op": "",
            "shapes": "",
        }
    )
    b = pd.DataFrame(
        {
            "rank": "",
            "name": ["ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"],
            "calls": 2,
            "ns": 7,
            "first": 0,
            "op": "",
            "shapes": "",
        }
    )
    m = match_kernels(a, b)
    assert sorted(m["match"]) == ["new", "vanished"]


# --- ranks
# --------------------------------------------------------------------------------------------------
def test_two_ranks_of_one_job_same_program_different_work(nsys):
    d = gpumagic.diff(nsys["rank0"], nsys["rank1"])
    reconciles(d)
    k = d.data.kernels
    nccl = k[k["name_a"].astype(str).str.startswith("ncclDevKernel")].iloc[0]
    assert (
        nccl["match"] == "same" and nccl["ns_a"] > 100 * nccl["ns_b"]
    )  # rank 0 waited for rank 1's GEMMs
    assert set(k.loc[k["match"] == "new", "calls_b"]) == {20}  # the 20 GEMMs rank 1 ran first
    assert "NCCL AllReduce" in d.changes[0]


def test_jobs_are_compared_rank_by_rank_with_nccl_wait_and_transfer(nsys):
    d = gpumagic.diff(nsys["straggler2"], nsys["ddp2"])
    reconciles(d)
    assert [r[0] for r in d.data.ranks] == ["rank 0", "rank 1"]
    f = d.data.figures.set_index(["rank", "figure"])
    wait = f.loc[("rank 0", "NCCL wait"), "a"]
    assert wait > 50e6  # the straggler's all-reduce waited ~53 ms on rank 0
    assert (
        f.loc[("rank 0", "NCCL wait"), "a"] + f.loc[("rank 0", "NCCL transfer"), "a"]
        == f.loc[("rank 0", "NCCL"), "a"]
    )
    per_rank = d.data.rows.groupby("rank")["delta_ns"].sum()
    busy = d.data.figures[d.data.figures["figure"] == "GPU busy"].set_index("rank")
    assert (per_rank == (busy["b"] - busy["a"]).astype("int64")).all()
    assert all(c.startswith("rank ") for c in d.changes)


def test_a_job_of_per_rank_files_against_one_export(nsys):
    d = gpumagic.diff(DATA / "per_rank" / "torch", nsys["straggler2"])
    reconciles(d)
    assert [r[0] for r in d.data.ranks] == ["rank 0", "rank 1"]


# --- the result
# --------------------------------------------------------------------------------------------------
def test_text_html_and_dataframe(nsys, tmp_path):
    d = gpumagic.diff(nsys["matmul"], nsys["block"], name_a="matmul", name_b="block")
    text = str(d)
    assert text.splitlines()[0].startswith(
        "GPU busy 7.97 ms (matmul) \u2192 183 ms (block): +175 ms"
    )
    assert "rows sum to +175 ms = the change in GPU busy" in text
    df = d.to_dataframe()
    assert "label" in df.columns and df["delta_ns"].sum() == d.delta_ns
    html = d._repr_html_()
    assert "Largest changes" in html and "<iframe" in html and "Where the GPU time moved" in html
    page = d.save_html(tmp_path / "diff.html")
    assert pathlib.Path(page).read_text().count("Bokeh") > 0
    bundle = d._repr_mimebundle_()
    assert bundle["text/plain"] == text


def test_names_are_escaped():
    evil = "void k<a&b></script><img src=x onerror=alert(1)>"
    d = gpumagic.diff(_trace([(evil, 10)]), _trace([(evil, 20)]))
    html = d.html(None)
    assert "<img src=x" not in html and "&lt;img" in html


def test_unknown_input_is_a_clear_error():
    with pytest.raises(gpumagic.GpuMagicError, match="cannot compare a int"):
        gpumagic.diff(1, 2)


def test_diff_summaries_is_pure():
    a, b = summarize(load_trace(TORCH["matmul"])), summarize(load_trace(TORCH["block"]))
    data = diff_summaries(a, b)
    assert data.slower_beyond(0.05) and not diff_summaries(b, a).slower_beyond(0.05)


# --- the command line
# ------------------------------------------------------------------------------------------------
def test_cli_exit_codes(nsys, tmp_path, capsys):
    assert diff_main([nsys["matmul"], nsys["block"]]) == 0
    assert diff_main([nsys["matmul"], nsys["block"], "--fail-above", "5%"]) == 1
    assert diff_main([nsys["block"], nsys["matmul"], "--fail-above", "5%"]) == 0
    out = tmp_path / "rows.json"
    assert diff_main([nsys["matmul"], nsys["matmul"], "--fail-above", "0", "--json", str(out)]) == 0
    assert (
        json.loads(out.read_text())["busy_ns"]["a"] == json.loads(out.read_text())["busy_ns"]["b"]
    )
    assert diff_main([str(tmp_path / "missing.sqlite"), nsys["block"]]) == 2
    (tmp_path / "bad.json").write_text("not json")
    assert diff_main([str(tmp_path / "bad.json"), nsys["block"]]) == 2
    assert "gpumagic diff:" in capsys.readouterr().err


def test_cli_through_python_m(nsys):
    from gpumagic.__main__ import main

    assert main(["diff", nsys["block"], nsys["matmul"]]) == 0


def test_the_waterfall_as_plain_bars_reconciles_without_a_bokeh_document():
    from gpumagic.render.diff_figure import waterfall_rows

    d = gpumagic.diff(
        load_trace(DATA / "torch_matmul_4096.json.gz"), load_trace(DATA / "torch_block.json.gz")
    )
    rows, _ = waterfall_rows(d.data.busy_a, d.data.busy_b, d._steps())
    # each step starts where the last ended; the last lands on B's GPU busy time
    level = rows[0]["right"]
    for r in rows[1:-1]:
        lo, hi = r["left"], r["right"]
        assert min(abs(lo - level), abs(hi - level)) < 1e-9 * max(1.0, level)
        level = hi if abs(lo - level) < abs(hi - level) else lo
    assert abs(level - rows[-1]["right"]) < 1e-6 * max(1.0, level)
    d.waterfall = "bars"
    html = d._repr_html_()
    assert "Where the GPU time moved" in html and "GPU busy, A" in html and "GPU busy, B" in html
    assert "Bokeh" not in html and "<script" not in html
