"""The kernel-name decoder on the kernels of training steps (tests/data/kernel_names_training.json).

The names are torch.profiler's, from an H100 running ``tests/data/capture/harvest_training.py``
(cuDNN batch norm and RNN, layer/RMS/group norm backward, CUB sort / scan / select / histogram,
cuSOLVER and MAGMA, foreach and fused optimizers, FP8 and int8 GEMMs, fp16 / bf16 matmul and
attention). Each entry's ``expect`` was annotated from the workload that ran the kernel and the
library's naming, not from the decoder: ``library``, ``op``, and ``precision`` and ``tensor_cores``
only where the name or the workload makes them certain (a bf16 run also launches fp32 kernels, so a
run's dtype alone is not enough). Where the name and the workload tell two stories (cuSOLVER's
Cholesky running a kernel of its LU template), the annotation lists both, separated by ``|``, and
either reading counts as right; a library matches by prefix ("cuBLAS" is right for "cuBLAS
(nvjet)").
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from gpumagic.kernels import FAMILIES, KernelName, decode

from ..helpers import DATA

TRAINING = json.loads((DATA / "kernel_names_training.json").read_text())
WORKLOADS = {
    "batchnorm_train",
    "rnn",
    "layernorm_bwd",
    "cub",
    "linalg",
    "linalg_magma",
    "optimizers",
    "fp8_rowwise",
    "int8_mm",
    "mixed",
}
FIELDS = ("library", "op", "precision", "tensor_cores")
#: The share of annotated fields the decoder must get right, over all entries.
MIN_SHARE = 0.98


def field_right(k: KernelName, field: str, want: object) -> bool:
    got = getattr(k, field)
    if isinstance(want, str):
        alternatives = tuple(want.split("|"))
        return got.startswith(alternatives) if field == "library" else got in alternatives
    return got == want


def score(entries: list[dict]) -> tuple[Counter, Counter, list[tuple]]:
    """(fields annotated, fields right, wrong rows), per field."""
    total, right, wrong = Counter(), Counter(), []
    for e in entries:
        k = decode(e["name"])
        for field, want in e["expect"].items():
            total[field] += 1
            if field_right(k, field, want):
                right[field] += 1
            else:
                wrong.append((e["workload"], field, want, getattr(k, field), e["name"][:100]))
    return total, right, wrong


def test_corpus_is_annotated_and_sourced():
    assert len(TRAINING) >= 300
    names = [e["name"] for e in TRAINING]
    assert len(set(names)) == len(names), "one entry per distinct name"
    assert {e["workload"] for e in TRAINING} == WORKLOADS
    for e in TRAINING:
        assert e["source"].startswith("H100, PyTorch 2.11+cu130: harvest_training.py workload"), e[
            "name"
        ][:80]
        assert e["workload"] in e["source"]
        assert set(e["expect"]) <= set(FIELDS) and {"library", "op"} <= set(e["expect"]), e["name"][
            :80
        ]
        assert isinstance(e["expect"].get("tensor_cores", True), bool)


def test_corpus_covers_the_training_libraries_and_precisions():
    libraries = {e["expect"]["library"] for e in TRAINING}
    assert libraries >= {
        "cuDNN",
        "cuBLAS",
        "cuBLASLt",
        "CUB",
        "cuSOLVER",
        "MAGMA",
        "PyTorch ATen",
        "CUDA runtime",
    }
    ops = {op for e in TRAINING for op in e["expect"]["op"].split("|")}
    assert ops >= {
        "norm",
        "rnn",
        "sort",
        "scan",
        "histogram",
        "foreach",
        "optimizer",
        "qr",
        "eigh",
        "cholesky",
    }
    precisions = {e["expect"].get("precision") for e in TRAINING}
    assert precisions >= {"fp32", "tf32", "fp16", "bf16", "fp64", "fp8e4m3", "int8", "int64"}


def test_every_harvested_name_is_annotated_or_a_near_copy_of_one():
    """Entries are the distinct names of the raw harvest; beyond three instantiations that differ
    only in their numbers and decode to the same expectations, the rest were left out."""
    harvest = json.loads((DATA / "kernels_training_h100.json").read_text())
    kept = {e["name"] for e in TRAINING}
    skeletons = {re.sub(r"\d+", "#", n) for n in kept}
    assert kept <= {r["name"] for r in harvest}
    for row in harvest:
        assert row["name"] in kept or re.sub(r"\d+", "#", row["name"]) in skeletons, row["name"][
            :100
        ]


def test_training_kernels_decode_to_their_annotated_fields():
    total, right, wrong = score(TRAINING)
    share = sum(right.values()) / sum(total.values())
    per_field = ", ".join(f"{f} {right[f]}/{total[f]}" for f in FIELDS)
    print(
        f"training corpus: {sum(right.values())}/{sum(total.values())} fields right "
        f"({share:.1%}); {per_field}"
    )
    assert share >= MIN_SHARE, wrong


def test_library_is_right_on_every_training_kernel():
    wrong = [
        (e["name"][:100], decode(e["name"]).library, e["expect"]["library"])
        for e in TRAINING
        if not field_right(decode(e["name"]), "library", e["expect"]["library"])
    ]
    assert not wrong, wrong


@pytest.mark.parametrize(
    "entry", TRAINING, ids=[f"{i}:{e['name'][:40]}" for i, e in enumerate(TRAINING)]
)
def test_training_kernel_decodes_without_error(entry):
    k = decode(entry["name"])
    assert k.family in FAMILIES and "decode_error" not in k.details
    assert k.short and len(k.short) < 120
    assert k.explain()


def test_precision_the_name_does_not_tell_is_not_guessed():
    """cuDNN's SDPA helpers carry an unpublished bool where fp16 and bf16 runs differ, and ATen's
    casts convert one dtype into another: none of them is annotated with a precision, and a
    generated SDPA kernel that ran for both 16-bit types reads as 16-bit, not as either."""
    assert (
        decode(next(e["name"] for e in TRAINING if "cudnn_generated" in e["name"])).precision
        == "16-bit"
    )
    for e in TRAINING:
        if "cudnn::fusion::" in e["name"] or "bfloat16_copy_kernel_cuda" in e["name"]:
            assert "precision" not in e["expect"], e["name"][:80]


def test_what_the_training_kernels_are_read_as():
    by_name = {e["name"]: decode(e["name"]) for e in TRAINING}

    def one(pattern: str) -> KernelName:
        return next(k for n, k in by_name.items() if re.search(pattern, n))

    rnn = one(r"^void RNN_blockPersist_bp_LSTM_HMMA<")
    assert (rnn.library, rnn.op, rnn.precision, rnn.tensor_cores) == ("cuDNN", "rnn", "fp16", True)
    assert one(r"^void RNN_blockPersist_bp_GRU_FMA<").tensor_cores is False
    adamw = one(r"FusedAdamMathFunctor<c10::BFloat16, 4, \(at::native::ADAM_MODE\)1")
    assert (adamw.op, adamw.precision, adamw.short) == (
        "optimizer",
        "bf16",
        "fused AdamW step (multi-tensor)",
    )
    # the metadata's fp32 scalars are not the data: the functor says bf16
    div = one(r"TensorListScalarListMetadata<float, 1>, .*BinaryOpScalarListFunctor<c10::BFloat16")
    assert (div.op, div.precision) == ("foreach", "bf16")
    sort = one(
        r"DeviceRadixSortOnesweepKernel<.*policy_hub<long, at::cuda::cub::detail::OpaqueType<8>"
    )
    assert (sort.library, sort.op, sort.precision) == ("CUB (in PyTorch)", "sort", "int64")
    stats = one(
        r"batch_norm_update_stats_and_invert"
    )  # (momentum, eps) are doubles; the data is float
    assert (stats.op, stats.precision) == ("norm", "fp32")
    wgrad = one(r"^sm80_xmma_wgrad_implicit_gemm_indexed_wo_smem_tf32f32")
    assert (wgrad.precision, wgrad.tensor_cores, wgrad.details["variant"]) == (
        "tf32",
        True,
        "wo_smem",
    )
    magma = one(r"^dlaset_band_upper\(")
    assert (magma.family, magma.library, magma.precision) == ("magma", "MAGMA", "fp64")
    step = by_name["Optimizer.step#AdamW.step"]
    assert (step.family, step.op, step.details["kind"]) == (
        "other",
        "optimizer",
        "profiler range, not a kernel",
    )
