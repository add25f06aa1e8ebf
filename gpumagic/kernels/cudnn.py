"""cuDNN's kernels and the fused attention kernels (FlashAttention, PyTorch's CUTLASS
memory-efficient attention).

cuDNN names come in two kinds: runtime-compiled ``cudnn_generated_*`` names that list their tokens
(arch, MMA kind, dtype, tile, cluster), and the older fixed kernels, named after what they do
(``nchwToNhwcKernel``, ``implicit_convolve_sgemm``), for which the function name is the best label.
cuDNN's xmma and ``{arch}_scudnn_*`` kernels are read by the cuBLAS decoders, as they share those
grammars.

Attention kernels matter because they replace a whole softmax(QKᵀ)V: the label says which
implementation ran, forward or backward, and where the name carries them, the head dimension, tile
and dtype.
"""

from __future__ import annotations

import re

from .name import DTYPE, MNK_TOKEN, Draft, dims, set_element_type, squash, upper
from .precision import precision_table
from .spelling import cpp_dtypes, signature, template_args

_VARIANT = {"fprop": "forward", "bprop": "backward", "dgrad": "backward", "wgrad": "backward"}


# cuDNN's RNN kernels, whose names need not mention cuDNN (RNN_blockPersist_bp_LSTM_FMA<float,
# ...>(block_bp_args_..)): the persistent-RNN kernels and the per-gate element-wise kernels of each
# cell type
_RNN = re.compile(
    r"(?:RNN_blockPersist|persistRNN|elemWiseRNNcell|(?:LSTM|GRU|RNN|GENERIC)_elementWise)(?:_\w+)?"
)
_RNN_WORDS = re.compile(r"RNN|LSTM|GRU|GENERIC_elementWise")
_RNN_MATH = {
    "HMMA": (True, "tensor cores (HMMA)"),
    "IMMA": (True, "tensor cores (IMMA)"),
    "FMA": (False, "FMA"),
}
# words of an attention backward in cuDNN's fusion kernels: dO·O, dQ / dK / dV, softmax statistics
_ATTENTION_WORDS = re.compile(
    r"(?:^|_)(?:d[oqkv]|sdpa|mha|fmha|attn|attention|flash|softmax_stats)(?=_|\d|$)"
)
_NORM = re.compile(
    r"(?:^|_)(?:bn|batchnorm|batch_norm|layernorm|layer_norm|groupnorm|instancenorm|rmsnorm)(?:_|$)"
)


# cuDNN's legacy (pre-v8-engine) convolution kernels, named after their algorithm and not after
# cuDNN (cuDNN's CUDNN_CONVOLUTION_FWD_ALGO_* / BWD_*_ALGO_* docs; they appear in TensorFlow and
# PyTorch profiles of cuDNN 7/8): implicit / precomputed / explicit "convolve_sgemm" forward
# kernels, and the wgrad / dgrad engines (``wgrad_alg0_engine``, ``wgrad_alg1_engine_NHWC``,
# ``dgrad_engine``, ``dgrad2d_alg1_1``), fp32 unless their template arguments say otherwise
_LEGACY_CONV = re.compile(
    r"(?:implicit|precomputed|explicit)_convolve_[a-z]?gemm|(?:wgrad|dgrad)(?:2d)?(?:_alg\d+)?"
    r"(?:_\d+)?_engine|[dw]grad2d_alg\d+(?:_\d+)?|conv2d_grouped_direct_kernel|fft2d_[rc]2[rc]_\w+"
)
_LEGACY_DIRECTION = (("wgrad", "conv_wgrad"), ("dgrad", "conv_dgrad"), ("convolve", "conv_fprop"))
# cuDNN 8's inference / training sub-libraries prefix their copies of the arch-prefixed kernels:
# cudnn_infer_ampere_scudnn_128x64_relu_interior_nn_v1 is ampere_scudnn_128x64_relu_interior_nn_v1
# in libcudnn_cnn_infer
_SUBLIBRARY = re.compile(r"^cudnn_(infer|train|ops_infer|ops_train|cnn_infer|cnn_train)_")


def _legacy_conv(k: Draft, leaf: str, args: str) -> bool:
    m = _LEGACY_CONV.match(leaf)
    if not m:
        return False
    # op "conv" as cuDNN's other fixed-function kernels; the direction goes to details
    k.identify("cudnn", "cuDNN", "conv")
    direction = next(op for word, op in _LEGACY_DIRECTION if word in leaf or word == "convolve")
    if not leaf.startswith(("fft2d", "conv2d_grouped")):
        k.details["direction"] = direction[5:]
    k.tensor_cores = False
    k.math = "CUDA cores (legacy cuDNN algorithm, no tensor cores)"
    algo = leaf.split("_convolve")[0] if "convolve" in leaf else leaf
    k.details["algorithm"] = algo
    k.add(leaf, "op", f"cuDNN legacy convolution ({algo}), {direction.replace('_', ' ')}")
    set_element_type(k, args)
    if k.precision is None and ("sgemm" in leaf or "engine" in leaf):
        k.precision, k.dtypes = "fp32", ("fp32",)
    if leaf.endswith("_NHWC"):
        k.layout = "NHWC"
    k.short = squash(f"cuDNN {upper(k.precision)} {direction.replace('_', ' ')} ({leaf})")
    return True


_CUT_CUTLASS = re.compile(r"cutlass__5x_cudnn::Kernel<(cutlass_\w*)")


def _cut_cutlass(k: Draft, full: str) -> bool:
    """``cutlass__5x_cudnn::Kernel<cutlass_tensorop_s16…>``: cuDNN's CUTLASS kernel whose name the
    profiler cut off (its full form is read by the CUTLASS 2.x decoder)."""
    m = _CUT_CUTLASS.match(full)
    if not m:
        return False
    inner = m.group(1)
    direction = next((d for d in ("fprop", "dgrad", "wgrad") if d in inner), None)
    k.identify("cudnn", "cuDNN", f"conv_{direction}" if direction else "conv")
    if "tensorop" in inner:
        k.tensor_cores, k.math = True, "tensor cores (mma)"
    elif "simt" in inner:
        k.tensor_cores, k.math = False, "SIMT (CUDA cores)"
    k.details["generator"] = "CUTLASS (cuDNN's copy)"
    k.add(full, "op", "cuDNN's CUTLASS convolution kernel; the rest of the name was cut off")
    k.short = squash(f"cuDNN CUTLASS {k.op.replace('_', ' ')}: {inner} (cut off)")
    return True


#: cuDNN's own namespace, as a name may lead with it.
_CUDNN_OWN = re.compile(r"^(?:void )?cudnn::")
#: cuDNN's runtime-fusion GEMMs on Blackwell: ``sm120_matMul_pointwise_pointwise`` (a matmul with
#: two pointwise epilogue nodes of the graph fused in).
_FUSED_MATMUL = re.compile(r"^(?P<arch>sm\d+[af]?)_matMul(?P<tail>(?:_[a-zA-Z]+)*)$")


def _fused_matmul(k: Draft, m: re.Match[str]) -> None:
    k.identify("cudnn", "cuDNN", "gemm", tensor_cores=True)
    k.set_arch(m["arch"])
    k.add("matMul", "op", "matrix multiply of a cuDNN operation graph (runtime fusion)")
    nodes = [t for t in m["tail"].split("_") if t]
    if nodes:
        k.epilogue = "+".join(nodes)
        k.add(
            "_".join(nodes),
            "epilogue",
            f"{len(nodes)} fused {' and '.join(dict.fromkeys(nodes))} node(s)",
        )
    k.short = "cuDNN fused GEMM" + (f" + {len(nodes)} {nodes[0]} op(s)" if nodes else "")


def decode_cudnn(k: Draft, sym: str, full: str) -> bool:
    """cuDNN's kernels: runtime-fusion GEMMs, legacy convolution algorithms, its sub-libraries'
    copies of the arch-prefixed kernels, generated names, FFT convolutions and the fixed-function
    kernels named after what they do (RNN, layout transforms, norms, ...)."""
    fused = _FUSED_MATMUL.match(sym)
    if fused:
        _fused_matmul(k, fused)
        return True
    path, leaf, args = signature(full)
    if _LEGACY_CONV.match(leaf or full) and _legacy_conv(k, leaf or full.split("(")[0], args):
        return True
    sub = _SUBLIBRARY.match(sym)
    if sub and "scudnn" in sym:
        from .cublas_legacy import decode_arch_prefixed

        if decode_arch_prefixed(k, sym[sub.end() :], full[sub.end() :]):
            k.details["sublibrary"] = f"libcudnn_{sub.group(1)}"
            return True
    named = ("cudnn" in full.lower() or "DSE::" in full) and not full.startswith("_Z")
    if not named and not _RNN_WORDS.search(full):
        return False  # cheap test first: most names reaching here are neither
    if full.startswith("cutlass__5x_cudnn::") and _cut_cutlass(k, full):
        return True
    rnn = _RNN.fullmatch(leaf) is not None and (
        "<" in full or "(" in full
    )  # a bare name is too thin to claim
    if not named and not rnn:
        return False
    k.identify("cudnn", "cuDNN")
    m = re.search(r"cudnn_generated_\w+", full)
    if m:
        _generated(k, m.group(0))
        return True
    if path.startswith("DSE::"):
        _fft_convolution(k, leaf, full)
        return True
    lower = leaf.lower()
    what = leaf
    if rnn:
        k.op = "rnn"
        cell = re.search(r"LSTM|GRU|RNN", leaf[3:] if leaf.startswith("RNN_") else leaf)
        what = f"RNN {'persistent kernel' if 'ersist' in leaf else 'element-wise step'}" + (
            f" ({cell.group(0)})" if cell else ""
        )
        math = _RNN_MATH.get(leaf.rsplit("_", 1)[-1])
        if math:
            k.tensor_cores, k.math = math
    elif "nchwtonhwc" in lower or "nhwctonchw" in lower:
        k.op = "layout_transform"
        what = f"layout transform {'NCHW→NHWC' if lower.startswith('nchw') else 'NHWC→NCHW'}"
    elif "workspace" in lower:
        k.op = "workspace_init"
        what = "workspace init"
    elif "fusion::" in path and _ATTENTION_WORDS.search(lower):
        k.op = "attention"
        what = f"attention step: {leaf}"
    elif _NORM.search(lower):
        k.op = "norm"
        what = (
            f"batch norm: {leaf}" if re.search(r"(?:^|_)(?:bn|batch)", lower) else f"norm: {leaf}"
        )
    elif "convert" in lower:
        k.op = "convert"
    elif re.search(r"conv|fprop|dgrad|wgrad|implicit", lower):
        k.op = "conv"
    else:
        k.op = lower or "other"
    k.add(leaf, "op", f"cuDNN {what}")
    set_element_type(k, args)
    k.short = squash(f"cuDNN {upper(k.precision)} {what}")
    return True


def _fft_convolution(k: Draft, leaf: str, full: str) -> None:
    """``DSE::vector_fft<..>``, ``DSE::regular_fft_pad<..>``: cuDNN's own FFT kernels for its FFT
    convolution algorithms (they are in libcudnn_engines_precompiled, not in cuFFT), named like
    cuFFT's older kernels."""
    k.op = "conv"
    k.details["algorithm"] = "fft"
    k.add(f"DSE::{leaf}", "op", "FFT step of an FFT-based convolution (cuDNN's internal FFT)")
    set_element_type(k, template_args(full))
    k.short = squash(f"cuDNN FFT convolution {upper(k.precision)}: {leaf}")


#: block-scaled data types cuDNN's generated names spell out (``..._flash_bprop_mxfp8_...``)
_MX = precision_table("mxfp8", "mxfp4", "nvfp4", "e4m3", aliases={"fp8": "fp8"})


def _sdpa_on_tensor_cores(arch: str | None) -> bool:
    """Whether cuDNN's generated SDPA for ``arch`` is a tensor-core kernel though its name says no
    instruction: the Blackwell ones (sm100, sm103, sm120, sm121)."""
    return arch is not None and arch[2:].isdigit() and int(arch[2:]) >= 100


def _generated(k: Draft, name: str) -> None:
    """cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_..._128x128x128_cga1x1x1_..."""
    toks = name.split("_")
    k.add("cudnn_generated", "library", "cuDNN runtime-compiled (generated) kernel")
    if "sdpa" in toks:
        k.op = "attention"
    elif "conv" in name or "fprop" in toks:
        k.op = "conv_fprop"
    else:
        k.op = "fused"
    variants: list[str] = []
    for t in toks[2:]:
        if re.fullmatch(r"sm\d+a?", t):
            k.set_arch(t)
        elif t in ("wgmma", "hmma", "mma", "tcgen05"):
            k.tensor_cores = True
            k.math = f"tensor cores ({t})"
            k.add(t, "math", "tensor cores")
        elif t == "f16":
            # cuDNN's generated kernels say f16 for 16-bit data: the same kernels run for fp16 and
            # bf16 inputs
            k.precision = "16-bit"
            k.dtypes += ("16-bit",)
            k.add(
                t,
                "dtype",
                "16-bit data (fp16 or bf16: the generated name does not tell them apart)",
            )
        elif t in _MX:
            k.precision = _MX[t]
            k.dtypes += (k.precision,)
            k.add(t, "dtype", f"{k.precision} data (block-scaled)")
        elif t in DTYPE and t != "void":
            k.precision = DTYPE[t]
            k.dtypes += (DTYPE[t],)
            k.add(t, "dtype", f"{DTYPE[t]} data")
        elif MNK_TOKEN.fullmatch(t) and k.tile is None:
            k.tile = t
            k.add(t, "tile", f"tile {dims(t)}")
        elif re.fullmatch(r"cga\d+x\d+x\d+", t):
            k.cluster = t[3:]
            k.add(t, "cluster", f"cooperative grid array (cluster) {dims(t[3:])}")
        elif t == "sdpa":
            k.add(t, "op", "scaled dot-product attention")
        elif t in ("flash", "fprop", "bprop", "dgrad", "wgrad"):
            variants.append(t)
            k.add(t, "variant", _VARIANT.get(t, t))
        else:
            k.add(t, "raw", "not decoded")
    if variants:
        k.details["variant"] = variants
    if k.op == "attention" and k.tensor_cores is None and _sdpa_on_tensor_cores(k.arch):
        # cuDNN's SDPA engines for Blackwell (sm100 tcgen05, sm120 mma) leave the instruction out
        # of the name; every one of them runs its two GEMMs on the tensor cores
        k.tensor_cores = True
        k.math = "tensor cores"
    direction = next((_VARIANT[v] for v in variants if v in _VARIANT), "")
    precision = k.precision if k.precision == "16-bit" else upper(k.precision)
    what = "SDPA (flash)" if k.op == "attention" else k.op
    k.short = squash(f"cuDNN {what} {direction} {precision}")


_FLASH = re.compile(
    r"\bflash(?:::|_)\w*(?:fwd|bwd)|pytorch_flash::|flash_attn|fmha_cutlass[FB]|FlashAttn|fmha_"
    r"|\bflash::compute_attn|\bflash::prepare_varlen"
)
# FlashAttention-3 (Dao-AILab/flash-attention hopper/): the kernel is a CUTLASS 3 device kernel or
# flash::compute_attn_ws, and what it does is in its template, capitalised: flash::FlashAttnFwdSm90,
# flash::FlashAttnBwd (and FlashAttnBwdSm90), flash::FlashAttnBwdPreprocess (dO·O row sums),
# flash::FlashAttnBwdPostprocessConvertdQ (dQ accumulator to the output type).
_FA3_STEP = re.compile(r"flash::(FlashAttn(?:Fwd|Bwd)\w*|compute_attn\w*|prepare_varlen\w*)")
_FA3_STEPS = {
    "prepare_varlen": "scheduling (blocks per sequence)",
    "Preprocess": "backward preprocessing (dO·O row sums)",
    "Postprocess": "backward postprocessing (dQ conversion)",
    "Combine": "split-KV combine",
}
_FA3_TILE = re.compile(r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)> >")
_FMHA = re.compile(
    r"fmha_cutlass([FB])_([a-z0-9]+?)_(aligned|notaligned)_(\d+x\d+)((?:_[a-z0-9]+?)*)_(sm\d+)"
)
_FMHA_EXTRA = {"rf": "accumulator in registers", "gmem": "accumulator in global memory"}
_TRAITS = re.compile(r"Flash_(?:fwd|bwd)_kernel_traits<(\d+), (\d+), (\d+), (\d+)")


def decode_flash(k: Draft, sym: str, full: str) -> bool:
    """FlashAttention (2 and 3) and PyTorch's memory-efficient attention: direction, step, dtype,
    head dimension and tile where the name carries them."""
    if _FLASH.search(full) is None or _CUDNN_OWN.match(full):  # cuDNN's own fmha_* helpers
        return False
    k.family = "flash_attention"
    k.op = "attention"
    k.tensor_cores = True
    path, leaf, _ = signature(full)
    leaf = leaf if path else full.split("(")[0]
    if leaf.startswith("fmha_cutlass") or "MemEffAttention" in full:
        _mem_efficient(k, leaf)
    else:
        _flash(k, leaf, full)
    if k.tensor_cores:
        k.math = "tensor cores (mma)"
    else:
        k.math = "CUDA cores (a pre- or post-processing step)"
    step = str(k.details.get("step", ""))
    k.short = squash(
        f"attention {k.details.get('direction', '')} ({k.library.split(' (')[0]}) "
        f"{upper(k.precision)}{' ' + step.split(' (')[0] if step else ''}"
    )
    return True


def _mem_efficient(k: Draft, leaf: str) -> None:
    """PyTorch's CUTLASS kernels: fmha_cutlassF_f16_aligned_64x64_rf_sm80 (direction, dtype, tile,
    extras, arch)."""
    k.library = "PyTorch memory-efficient attention (CUTLASS)"
    fm = _FMHA.match(leaf)
    if not fm:
        return
    direction, dt, al, tile, acc, sm = fm.groups()
    k.details["direction"] = "forward" if direction == "F" else "backward"
    k.precision = DTYPE.get(dt, dt)
    k.dtypes = (k.precision,)
    k.tile = tile
    k.set_arch(sm)
    k.add("fmha_cutlass" + direction, "op", f"fused multi-head attention, {k.details['direction']}")
    k.add(dt, "dtype", f"{k.precision} Q/K/V")
    k.add(al, "alignment", al)
    k.alignment = al
    k.add(tile, "tile", f"queries × keys per block {dims(tile)}")
    for extra in filter(None, acc.strip("_").split("_")):
        if re.fullmatch(r"k\d+", extra):
            meaning = f"head dimension up to {extra[1:]}"
        else:
            meaning = _FMHA_EXTRA.get(extra, "not decoded")
        k.add(extra, "variant", meaning)


def _flash(k: Draft, leaf: str, full: str) -> None:
    """FlashAttention 2/3 and PyTorch's copy: direction from the kernel, head dim / tile / warps
    from the traits."""
    k.library = "FlashAttention (PyTorch)" if "pytorch_flash" in full else "FlashAttention"
    fa3 = _FA3_STEP.search(full[:4000])
    step = ""
    if fa3:
        k.library = "FlashAttention-3"
        leaf = fa3.group(1)
        direction = "backward" if "Bwd" in leaf or "bwd" in leaf else "forward"
        step = next((v for key, v in _FA3_STEPS.items() if key in leaf), "")
        if step:
            k.details["step"] = step
            k.tensor_cores = False
        if "Sm90" in full or "compute_attn_ws" in leaf or "arch::Sm90" in full:
            k.set_arch("sm90")
        tile = _FA3_TILE.search(full[:4000])
        if tile and not step:
            k.tile = "x".join(tile.groups())
            k.details["head_dim"] = int(tile.group(3))
            k.add(tile.group(0), "tile", f"block tile {dims(k.tile)} (head dim {tile.group(3)})")
    else:
        direction = "backward" if "bwd" in leaf else "forward"
    k.details["direction"] = direction
    k.add(
        leaf,
        "op",
        f"flash attention {direction}"
        + (" (split-KV)" if "splitkv" in leaf else "")
        + (f": {step}" if step else ""),
    )
    tm = _TRAITS.search(full)
    if tm:
        hd, bm, bn, nw = tm.groups()
        k.details["head_dim"] = int(hd)
        k.tile = f"{bm}x{bn}"
        k.warps = nw
        k.add(f"<{hd}, {bm}, {bn}, {nw}>", "traits", f"head dim {hd}, block {bm}×{bn}, {nw} warps")
    dts = tuple(d for d in cpp_dtypes(template_args(full)) if d not in ("bool", "int32", "int64"))
    if dts:
        k.dtypes = dts
        k.precision = dts[0]
