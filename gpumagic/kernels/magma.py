"""MAGMA's kernels: what torch.linalg runs with
``torch.backends.cuda.preferred_linalg_library("magma")``.

MAGMA names its GPU kernels the LAPACK way, a precision letter and the routine
(``slaset_band_upper``, ``dlansy_max_kernel_lower``: s = fp32, d = fp64, c = complex64, z =
complex128), or with its own prefix (``magma_max_nan_kernel<float>``, ``magmablas_*``), whose
element type is then a template argument. Only the LAPACK auxiliaries (``la*``: set, copy, scale,
norms, swaps, reflectors) are read from the letter, with an underscore after the routine, as MAGMA
spells its variants; BLAS-like names (``sgemm_...``) are left to cuBLAS, which has more of them.
cuBLAS's MAGMA-derived kernels (``magma_lds128_sgemm_kernel``, ``magma_hgemmEx_kernel``) are
cuBLAS's and are read before this. MAGMA calls cuBLAS for its GEMMs and TRMMs, which keep their
owner's name.
"""

from __future__ import annotations

import re

from .name import PREFIX, Draft, set_element_type, squash, upper
from .spelling import signature

_LETTERED = re.compile(r"([sdcz])(la(?:set|cpy|scl|swp|nsy|nhe|nge|nst|rfg|rft|rfb|rf))_\w+")
_PREFIXED = re.compile(r"magma(?:blas)?_\w+")
_AUXILIARY = {
    "laset": "set a matrix to given diagonal and off-diagonal values (laset)",
    "lacpy": "copy a matrix (lacpy)",
    "lascl": "scale a matrix (lascl)",
    "laswp": "row interchanges (laswp)",
    "lansy": "norm of a symmetric matrix (lansy)",
    "lanhe": "norm of a Hermitian matrix (lanhe)",
    "lange": "norm of a general matrix (lange)",
    "lanst": "norm of a tridiagonal matrix (lanst)",
}
# (op, words in a magma_* name), first match wins; the rest are helpers
_OPS = (
    ("gemm", r"gemm"),
    ("cholesky", r"potrf|potf2"),
    ("lu", r"getrf|getf2|laswp"),
    ("qr", r"geqr|larf"),
    ("eigh", r"syev|heev|sytrd|hetrd|laed|stedc"),
    ("svd", r"gesvd|gebrd"),
)


def decode_magma(k: Draft, sym: str, full: str) -> bool:
    """A MAGMA kernel, a global function: a LAPACK auxiliary by its precision letter, or a
    ``magma_*`` / ``magmablas_*`` kernel with its element type among the template arguments."""
    if "<" not in full and "(" not in full and not full.startswith("magma"):
        # a bare name is too thin to claim, as for the other math libraries, unless it says
        # MAGMA's own prefix (magma_hgemmEx_kernel: the batched GEMMs cuBLAS runs on SM 12.x)
        return False
    path, name, args = signature(full)
    if path != name and not path.startswith("magma"):
        return False  # MAGMA's kernels are global functions
    lettered = _LETTERED.fullmatch(name)
    if lettered is None and _PREFIXED.fullmatch(name) is None:
        return False
    k.identify("magma", "MAGMA")
    if lettered:
        letter, routine = lettered.groups()
        k.op = "helper"
        k.precision = PREFIX[letter]
        k.dtypes = (k.precision,)
        k.add(
            name,
            "op",
            f"{_AUXILIARY.get(routine, 'LAPACK auxiliary routine')}, {k.precision} ('{letter}')",
        )
    else:
        k.op = next((op for op, words in _OPS if re.search(words, name)), "helper")
        k.add(
            name,
            "op",
            "MAGMA kernel"
            + (f" ({k.op})" if k.op != "helper" else ": a helper inside its routines"),
        )
        set_element_type(k, args)
        gemm = re.search(r"magma(?:blas)?_([sdchz])gemm", name)
        if k.precision is None and gemm:
            k.precision = PREFIX[gemm.group(1)]
    k.short = squash(f"MAGMA {upper(k.precision)} {k.op}: {name}")
    return True
