"""cuSPARSE's kernels: sparse × dense products (SpMM, SpMV), SDDMM, SpGEMM, format conversions,
triangular solves.

The generic API's kernels live in namespace ``cusparse::`` and name the routine and algorithm
(``cusparse::csrmm_alg2_kernel``, ``cusparse::csrmv_v3_kernel``, ``cusparse::sddmm_ker``); their
template arguments list the index types (``int`` or ``long``: 32- or 64-bit indices) and the value
types (``float``, ``double``, ``cusparse::Complex<float>``, ``__half``). Older kernels have no
namespace (``convert_CooToCsr_kernel``, ``csrgeam_windowBased_core``, ``gtsv_lu``) and are
recognised by their routine prefix from a full signature.
"""

from __future__ import annotations

import re

from .name import Draft, routine_of, routine_table, set_element_type, squash, upper
from .spelling import index_type, signature, split_top

_OPS = {
    "spmm": "SpMM",
    "spmv": "SpMV",
    "sddmm": "SDDMM",
    "spgemm": "SpGEMM",
    "spgeam": "sparse add",
    "convert": "format conversion",
    "sptrsv": "triangular solve",
    "sptrsm": "triangular solve (many RHS)",
    "ic0": "incomplete Cholesky",
    "ilu0": "incomplete LU",
    "tridiagonal_solve": "tridiagonal solve",
    "partition": "load-balancing partition",
    "scale": "scale",
    "helper": "helper",
}
#: (op, pattern on the kernel name, meaning); the first that matches wins
_ROUTINES = routine_table(
    (
        (
            "spmm",
            r"csrmm\w*|bsrmm\w*|coomm\w*|spmm\w*|csrMm\w*",
            "sparse × dense matrix product (SpMM)",
        ),
        (
            "spmv",
            r"csrmv\w*|bsrx?mv\w*|dbsrxmv\w*|coomv\w*|spmv\w*|csrMv\w*|gemvi\w*",
            "sparse matrix × vector (SpMV)",
        ),
        ("sddmm", r"sddmm\w*", "sampled dense-dense matrix product (SDDMM)"),
        (
            "spgemm",
            r"\w*spgemm\w*|\w*SpGEMM\w*|csrgemm\w*",
            "sparse × sparse matrix product (SpGEMM)",
        ),
        ("spgeam", r"csrgeam\w*", "sparse + sparse (csrgeam)"),
        (
            "convert",
            r"convert_\w+|csr2\w+|bsr2\w+|gebsr2\w+|coo2\w+|prune_\w+|cusparseParseDense\w*"
            r"|cusparseCountNnzPerRow\w*|build_bscRowInd\w*",
            "sparse format conversion (COO / CSR / BSR / dense)",
        ),
        ("sptrsv", r"csrsv\w*|bsrsv\w*", "sparse triangular solve, one right-hand side"),
        ("sptrsm", r"csrsm\w*|bsrsm\w*", "sparse triangular solve, many right-hand sides"),
        ("ic0", r"csric0\w*|bsric0\w*|ic0_\w+", "incomplete Cholesky factorisation (ic0)"),
        ("ilu0", r"csrilu0\w*|bsrilu0\w*|ilu0_\w+", "incomplete LU factorisation (ilu0)"),
        (
            "tridiagonal_solve",
            r"gtsv\w*|gpsv\w*|pcr\w+|cr\w+_(?:batch|multiple)|cuThomas\w*|spike_\w+"
            r"|tiled_diag_pivot\w*",
            "tridiagonal / pentadiagonal solver (gtsv, gpsv)",
        ),
        ("partition", r"\w*partition\w*", "splits rows / non-zeros evenly across thread blocks"),
        (
            "scale",
            r"matrix_scalar_multiply_kernel|cusparse_scal_kernel|scale_\w+",
            "scales a dense matrix (C = beta·C before the product accumulates)",
        ),
    )
)
# Old cuSPARSE kernels outside the namespace: only these routine names, from a full signature
_LEGACY = re.compile(
    r"convert_(?:CooToCsr|CsrToCoo)_kernel|csrgeam\w*|csr2csr_compress\w*|csr2bsr\w*|bsr2csr\w*|gebsr2csr\w*"
    r"|bsrx?mv_\w*core|dbsrxmv\w*|bsrmm_\w*core|bsrs[vm]2_\w+|csrsv2_\w+|csric0_\w+|csrilu0\w*|bsric0\w*|bsrilu0\w*"
    r"|gtsv_\w+|gpsv_\w+|pcrGtsv\w*|cuThomasBatch|gemvi_kernel|cusparse\w+|prune_(?:csr|dense)_core|csrMv_kernel"
    r"|csrMm_kernel"
)


def decode_cusparse(k: Draft, sym: str, full: str) -> bool:
    """A cuSPARSE kernel, from a full signature in namespace ``cusparse::`` (or one of the older
    routine names): the routine, algorithm, index and value types."""
    if "<" not in full and "(" not in full:
        return False  # a bare routine name is too thin to claim (see cublas_legacy's docstring)
    path, name, args = signature(full)
    cub = (
        path.startswith("cub::") and "cusparse::" in full
    )  # a CUB primitive instantiated with cuSPARSE's types
    if not (path.startswith("cusparse::") or cub or _LEGACY.fullmatch(name)):
        return False
    op, meaning = routine_of(_ROUTINES, name) or ("helper", "cuSPARSE internal")
    if cub:
        op, meaning = (
            "helper",
            f"CUB {name} run by cuSPARSE (its template arguments name cuSPARSE types)",
        )
    k.identify("cusparse", "cuSPARSE", op)
    k.add(name, "op", meaning)
    alg = re.search(r"_(alg\d|v\d)(?:_|$)", name)
    if alg:
        k.details["algorithm"] = alg.group(1)
        k.add(alg.group(1), "algorithm", f"cuSPARSE algorithm {alg.group(1)}")
    fmt = re.match(r"(csr|csc|coo|bsr|gebsr|ell)", name)
    if fmt and op in ("spmm", "spmv", "sddmm", "spgemm", "sptrsv", "sptrsm"):
        k.details["format"] = fmt.group(1).upper()
    set_element_type(k, args, what="values")
    idx = index_type(split_top(args))
    if idx:
        k.details["index_type"] = idx
        k.add("int" if idx == "int32" else "long", "index", f"{idx[3:]}-bit indices")
    label = _OPS[op]
    if "format" in k.details:
        label += f" ({k.details['format']}{', ' + alg.group(1) if alg else ''})"
    tail = f": {name}" if op in ("helper", "partition", "scale") else ""
    k.short = squash(f"cuSPARSE {upper(k.precision)} {label}{tail}")
    return True
