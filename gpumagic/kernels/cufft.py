"""cuFFT's kernels: the transform passes (``regular_fft``, ``vector_fft``, their ``_r2c`` / ``_c2r``
/ ``_factor`` forms, Bluestein and prime-size kernels) and the steps around them (real<->complex
pre/post-processing, packing).

Current releases name the transform kernels ``{regular|vector}_fft[_r2c|_c2r|_factor]<SIZE,
EPT<n...>, ..., (padding_t)p, (twiddle_t)t, (loadstore_modifier_t)l, (layout_t)y, unsigned int,
float, ...>``: the first template argument is the transform length of this pass, ``EPT<...>`` the
elements each thread holds (one per radix when the length is mixed-radix), and the real type after
the index type the precision (``float``, ``double``, ``__half``). The other arguments are not
published; they are shown, not interpreted. Profiles from older releases show the same kernels with
plain integer arguments (``regular_fft<128, 1, 8, 16, ...>``) and kernels named by precision and
radix (``dpRadix0256C::kernel1Mem``); those are read as far as their names go. ``DSE::vector_fft``
and its relatives are cuDNN's FFT-convolution kernels (they live in libcudnn, not libcufft) and
decode as cuDNN.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .name import Draft, set_element_type, squash, upper
from .spelling import signature, split_top, template_args

_TRANSFORM = re.compile(
    r"(?P<kind>regular|vector|prime|multi_bluestein|regular_bluestein|composite_2way_prime)_fft"
    r"(?P<symm>_symm)?(?:_(?P<sub>r2c|c2r|factor))?"
)
_KIND = {
    "regular": "regular FFT pass",
    "vector": "vector FFT pass",
    "prime": "prime-length FFT",
    "composite_2way_prime": "composite FFT with a prime factor",
    "regular_bluestein": "Bluestein (chirp-z) FFT, for lengths with large prime factors",
    "multi_bluestein": "Bluestein (chirp-z) FFT, batched small pass",
}
_SUB = {
    "r2c": ("r2c", "real-to-complex transform"),
    "c2r": ("c2r", "complex-to-real transform"),
    "factor": ("c2c", "one pass (factor) of a multi-pass transform"),
}


class _Step(NamedTuple):
    """A kernel around the transform passes."""

    pattern: re.Pattern[str]  # on the kernel name
    transform: str  # the transform kind it belongs to, '' when any
    meaning: str
    label: str  # for the short form
    own_name: bool  # the name alone is cuFFT's; else the signature must show cuFFT's types


def _s(pattern: str, transform: str, meaning: str, label: str, own_name: bool = True) -> _Step:
    return _Step(re.compile(pattern), transform, meaning, label, own_name)


_STEPS = (
    _s(
        r"preprocess\w*",
        "c2r",
        "real<->complex pre-processing before a half-length FFT",
        "pre-process",
        False,
    ),
    _s(
        r"postprocess\w*",
        "r2c",
        "real<->complex post-processing after a half-length FFT",
        "post-process",
        False,
    ),
    _s(r"packR2C\w*", "r2c", "packs real input for a real-to-complex transform", "pack R2C input"),
    _s(
        r"unpackC2R\w*",
        "c2r",
        "unpacks the output of a complex-to-real transform",
        "unpack C2R output",
    ),
    _s(r"repackC2C\w*", "c2c", "repacks data between complex passes", "repack"),
    _s(
        r"generate_chirp_signal",
        "",
        "builds the chirp sequence of a Bluestein FFT",
        "Bluestein chirp",
    ),
    _s(
        r"scale_conjugate",
        "",
        "scales and conjugates (Bluestein / inverse step)",
        "scale-conjugate",
        False,
    ),
    _s(
        r"mgpu_distribute\w*",
        "",
        "redistributes data between the GPUs of a multi-GPU plan",
        "multi-GPU exchange",
    ),
)
# cuFFT's own argument types, which tell its pre/post-processing kernels from other projects' of the
# same name
_CUFFT_TYPES = re.compile(
    r"real_complex_args_t|RealComplex_st|loadstore_modifier_t|callback_t|kernel_arguments"
)

# older names: {s,d,h}p + Radix / Vector / RealComplex + length + variant letter :: kernel
_OLD = re.compile(
    r"(?:^|::)(?P<prec>[sdh])p(?P<family>Radix|Vector|RealComplex|Bluestein|Transpose)(?P<n>\d*)[A-Z]?$"
)
_OLD_PREC = {"s": "fp32", "d": "fp64", "h": "fp16"}
_ENUM = re.compile(r"\((\w+_t)\)(-?\d+)")


def decode_cufft(k: Draft, sym: str, full: str) -> bool:
    """A cuFFT kernel: a transform pass with its length, radices and element type, or a step around
    one (pre/post-processing, packing), also behind cuFFT's ``kernel_wrapper``."""
    path, name, args = signature(full)
    if (
        name == "kernel_wrapper"
    ):  # 'kernel_wrapper<unsigned int, &(void packR2C_kernel_impl<..>(..))>'
        inner = re.search(r"&\(?(?:void )?(\w+)<", full)
        name = inner.group(1) if inner else name
        args = template_args(full[full.find(name) :])  # the wrapped function's arguments
    m = _TRANSFORM.fullmatch(name)
    old = _OLD.search("::".join(path.split("::")[:-1])) if "::" in path else None
    step = None if m or old else next((s for s in _STEPS if s.pattern.fullmatch(name)), None)
    if step and not (step.own_name or _CUFFT_TYPES.search(full) or "kernel_wrapper" in full):
        step = None
    if not (m or old or step):
        return False
    k.identify("cufft", "cuFFT", "fft")
    set_element_type(k, args)
    if m:
        _transform(k, name, m, split_top(args))
    elif old:
        _old(k, path, old)
    elif step:
        if step.transform:
            k.details["transform"] = step.transform
        k.add(name, "step", step.meaning)
        k.short = squash(f"cuFFT {step.label} {upper(k.precision)}")
    return True


def _transform(k: Draft, name: str, m: re.Match[str], args: list[str]) -> None:
    kind, sub = m.group("kind"), m.group("sub")
    transform, sub_meaning = _SUB.get(sub or "", ("c2c", "complex-to-complex pass"))
    k.details["transform"] = transform
    k.details["algorithm"] = kind
    symm = "; exploits the Hermitian symmetry of real data" if m.group("symm") else ""
    k.add(name, "op", f"{_KIND[kind]}; {sub_meaning}{symm}")
    if args and args[0].isdigit():
        k.details["fft_size"] = int(args[0])
        k.add(
            args[0],
            "size",
            f"transform length {args[0]}" + (" (this pass)" if sub == "factor" else ""),
        )
    ept = next((a for a in args if a.startswith("EPT<")), None)
    if ept:
        radices = [int(x) for x in re.findall(r"\d+", ept)]
        k.details["elements_per_thread"] = radices
        k.add(ept, "EPT", f"{' × '.join(map(str, radices))} elements per thread")
    for enum, value in _ENUM.findall(", ".join(args)):
        k.add(
            f"({enum}){value}",
            "raw",
            f"{enum.removesuffix('_t')} = {value} (meaning not published)",
        )
    size = k.details.get("fft_size")
    label = {"c2c": "C2C", "r2c": "R2C", "c2r": "C2R"}[transform]
    variant = (
        "Bluestein"
        if "bluestein" in kind
        else kind.replace("_", " ") + (" pass" if sub == "factor" else "")
    )
    k.short = squash(
        f"cuFFT {label} {upper(k.precision)} FFT"
        + (f", size {size}" if size else "")
        + f" ({variant})"
    )


def _old(k: Draft, path: str, m: re.Match[str]) -> None:
    k.precision = _OLD_PREC[m.group("prec")]
    k.dtypes = (k.precision,)
    family, n = m.group("family"), m.group("n")
    k.details["algorithm"] = family.lower()
    if family == "RealComplex":
        k.details["transform"] = "r2c/c2r"
    if n:
        k.details["fft_size"] = int(n)
    k.add(path, "op", f"{family} kernel (older cuFFT naming)" + (f", length {int(n)}" if n else ""))
    k.short = squash(
        f"cuFFT {upper(k.precision)} {family}"
        + (f" {int(n)}" if n else "")
        + f": {path.split('::')[-1]}"
    )
