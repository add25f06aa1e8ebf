"""FlashAttention-3's kernels (Dao-AILab/flash-attention ``hopper/``): the direction is in the
template (``flash::FlashAttnBwd``, capitalised) of a CUTLASS 3 device kernel or of
``flash::compute_attn_ws``, not in the leaf's name.

Names from DeepSeek's published training profile (deepseek-ai/profile-data ``train.json``, H800),
cut after the parts the decoder reads.
"""

from __future__ import annotations

from gpumagic.kernels import decode

FWD = (
    "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, "
    "cutlass::bfloat16_t, 128>, true, flash::SingleTileScheduler, flash::SeqLenTraits<true> >("
    "flash::CollectiveMainloopFwd<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, "
    "cutlass::bfloat16_t, 128>, true, flash::SeqLenTraits<true> >::Params)"
)
BWD = (
    "void cutlass::device_kernel<flash::FlashAttnBwd<flash::CollectiveMainloopBwd<2, "
    "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<64>, cute::C<128>, "
    "cute::C<192> >, cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, cutlass::bfloat16_t, "
    "float, cutlass::arch::Sm90, true, true, false, false, false, 1> > >(Params)"
)
PRE = (
    "void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>, "
    "cute::C<192> >, cute::tuple<cute::C<64>, cute::C<128> >, cutlass::bfloat16_t, float, "
    "cutlass::arch::Sm90, true, true> >(Params)"
)
POST = (
    "void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<cute::tuple<cute::C<64>, "
    "cute::C<192> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, 256> >(Params)"
)


def test_compute_attn_ws_is_the_fa3_forward_with_its_traits():
    k = decode(FWD)
    assert (k.family, k.library, k.op) == ("flash_attention", "FlashAttention-3", "attention")
    assert k.details["direction"] == "forward" and k.details["head_dim"] == 192
    assert (k.tile, k.warps, k.precision, k.arch) == ("128x128", "12", "bf16", "sm90")


def test_flash_attn_bwd_in_a_device_kernel_is_backward():
    k = decode(BWD)
    assert k.details["direction"] == "backward" and k.library == "FlashAttention-3"
    assert k.tensor_cores is True and k.precision == "bf16" and "backward" in k.short


def test_backward_pre_and_post_processing_are_backward_steps_without_tensor_cores():
    for name, step in ((PRE, "preprocessing"), (POST, "postprocessing")):
        k = decode(name)
        assert k.details["direction"] == "backward" and step in k.details["step"]
        assert k.tensor_cores is False and step in k.short
