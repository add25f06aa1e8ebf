"""cuSOLVER's dense kernels: LU, Cholesky, QR, SVD and eigensolvers, and the helpers they share.

cuSOLVER names its kernels after the LAPACK routine they implement (``getrf_pivot``,
``potrf_alg2_cta_lower``, ``geqr2_smem_domino_fast``, ``gesvdbj_batch_32x16``,
``syevj_diagonal_kernel``, ``laed4_par``), so the routine prefix gives the operation; a few generic
kernel names (``kernel``, ``epilogue``, ``transpose``) are recognised by their parameter structs
(``getrf_wo_pivot_params_``, ``sytrd_params``). The element type is the first template argument:
``float``, ``double``, or CUDA's vector types standing for complex numbers (``float2`` = complex64,
``double2`` = complex128). Only kernels whose names are in libcusolver are claimed here; the TRSM /
TRSV and batched getrf kernels that cuSOLVER calls live in cuBLAS and decode as cuBLAS.
"""

from __future__ import annotations

import re

from .name import Draft, routine_of, routine_table, set_element_type, squash, upper
from .spelling import signature

_OPS = {
    "lu": "LU",
    "cholesky": "Cholesky",
    "qr": "QR",
    "svd": "SVD",
    "eigh": "symmetric eigensolver",
    "eig": "general eigensolver",
    "ldl": "LDL^T factorisation",
    "trsm": "triangular solve",
    "sparse_solve": "sparse solver",
    "helper": "helper",
}
#: (op, pattern on the kernel name, what the routine is); the first that matches wins
_ROUTINES = routine_table(
    (
        (
            "lu",
            r"getrf\w*|getf[24]\w*|getrs\w*|batch_getrf\w*|xxtrf4_set_info_ker|laswp_kernel2\w*|laswp_outofplace\w*",
            "LU factorisation with partial pivoting (getrf) or its solve (getrs)",
        ),
        (
            "lu",
            r"ipiv_\w+|create_pivot\w*|adjust_pivot\w*|perm_piv_row|setup_paripiv\w*|\w*swap_decision_kernel"
            r"|unblocked_swap_kernel|undo_swap_kernel|update_column_\w+",
            "LU pivoting: row interchanges (ipiv)",
        ),
        (
            "cholesky",
            r"potrf\w*|potf2\w*|potrs\w*|chol_(?:check_singularity|dump_diag)\w*",
            "Cholesky factorisation (potrf) or its solve (potrs)",
        ),
        (
            "ldl",
            r"sytrf\w*|sytf2\w*|blocksize_decision_kernel|unblocked_LDinv_UDinv_kernel|lasyf\w*",
            "symmetric indefinite (LDL^T, Bunch-Kaufman) factorisation (sytrf)",
        ),
        (
            "qr",
            r"geqrf\w*|geqr2\w*|orgqr\w*|ungqr\w*|ormqr\w*|unmqr\w*|orgql\w*|ormql\w*|qr_(?:[Dd]inv|check_singularity|colscale|setupG|rcond)\w*"
            r"|checkR_kernel",
            "QR factorisation (geqrf), forming or applying Q (orgqr / ormqr)",
        ),
        (
            "qr",
            r"larf[tbg]?\w*|setup_vhat_\w+|shift_householder_vector\w*|shift_right_kernel",
            "Householder reflectors: building (larfg), the block factor T (larft), applying "
            "them (larfb)",
        ),
        (
            "svd",
            r"gesvd\w*|svd_(?:col|row|music)\w*|batched_svd\w*|gebrd\w*|gebd2\w*|labrd\w*|bdsqr\w*|lasr_\w+"
            r"|batch_correct_S_kernel|batch_normalize_U_kernel",
            "singular value decomposition (gesvd / gesvdj / gesvda) or bidiagonalisation (gebrd)",
        ),
        (
            "eigh",
            r"syevj\w*|syevbj\w*|syevd\w*|heevj\w*|batchsyevj\w*|batch_syevj\w*|column_rotate_batch\w*"
            r"|row_rotate_batch\w*|batch_parallel_jacobi\w*",
            "symmetric / Hermitian eigensolver (syevd, Jacobi syevj)",
        ),
        (
            "eigh",
            r"sytrd\w*|sytd2\w*|latrd\w*|ormtr\w*|orgtr\w*",
            "tridiagonal reduction (sytrd) of a symmetric eigensolver, or its "
            "back-transformation (ormtr)",
        ),
        (
            "eigh",
            r"stedc\w*|steqr\w*|[sd]?laed\d\w*|merge_ker|scale_max",
            "tridiagonal eigensolver: divide and conquer (stedc / laed*), QR iteration "
            "(steqr), or the scaling by the"
            " largest element before them (scale_max)",
        ),
        (
            "eig",
            r"gebal\w*|gehd2\w*|gehrd\w*|find_(?:row|col)_topological_ordering|init_\w+_blocks_list"
            r"|batch_small_(?:triangular_solve|linear_update|shifted_solve)|bound_blocks_T|reduce_scaling|scale_consistently|restore_quasitriangular_matrix"
            r"|set_info_nonconvergence|normalize_vectors",
            "general (non-symmetric) eigensolver (geev): balancing, Hessenberg, vectors",
        ),
        (
            "trsm",
            r"trsm_lower|trsm_right|trtri\w*|batch_trs[mv]_\w+",
            "cuSOLVER's own triangular solve / inverse",
        ),
        (
            "sparse_solve",
            r"csrqr\w*|csrchol\w*|gluFactorKernel\w*|glu_(?:csr|dense|ilu0|tile|internal|lu_|maxL|rcond|trsm|gemm|gather|scatter"
            r"|L_factor|Q_factor|[lqd]+csrsv|csrilu0)\w*|iglu\w*|rfcsrsv\w*|spcsrsv\w*|sulu_\w+|supernode_\w+",
            "sparse direct solver (cusolverSp / cusolverRf)",
        ),
        (
            "helper",
            r"lacpy\w*|lapack_\w+|lascl\w*|lansy\w*|x?lange\w*|gelange\w*|x?laset\w*|lacgv\w*"
            r"|cusolver\w*|cuds_\w+|copy_info_kernel|xx_set_info_ker|set_info_kernel|batch_eye_kernel|reset_lowerA_kernel"
            r"|zero_lower_kernel|\w*colperm_kernel|pegasus\w*|find_nan_kernel|ipiv_32_to_64|\w*FnrmA_\w+|\w*offA_\w+"
            r"|batch_symmetrize_kernel|hermitianize_\w+|gemmcn_skinny_kernel",
            "LAPACK-style helper (copy, scale, norm, set, sort, permute) used inside "
            "cuSOLVER's routines",
        ),
    )
)
# Kernels named 'kernel' / 'epilogue' / 'transpose' say what they belong to through their parameter
# struct.
_PARAMS = (
    ("getrf_wo_pivot_params_", "lu", "LU factorisation without pivoting"),
    ("getrf_params_", "lu", "LU factorisation (getrf)"),
    ("sytrd_params", "eigh", "tridiagonal reduction (sytrd) of a symmetric eigensolver"),
    ("stedc_params_", "eigh", "tridiagonal divide-and-conquer eigensolver (stedc)"),
)
_GENERIC_NAMES = (
    "kernel",
    "epilogue",
    "transpose",
    "partition",
    "normalize_vectors",
    "set_info_nonconvergence",
)


def decode_cusolver(k: Draft, sym: str, full: str) -> bool:
    """A cuSOLVER kernel, from a full signature: its routine (or, for a generic name, its parameter
    struct) gives the op, its first template argument the element type."""
    if "<" not in full and "(" not in full:
        return False  # a bare routine name is too thin to claim (see cublas_legacy's docstring)
    path, name, args = signature(full)
    hit = _routine(name, path, full)
    if hit is None:
        return False
    op, meaning = hit
    k.identify("cusolver", "cuSOLVER", op)
    k.add(name, "op", meaning)
    # the tridiagonal stage is real even for complex input: stedc_params_<float2, float, ...> is an
    # fp32 problem
    stedc = (
        bool(re.match(r"(?:steqr|stedc|[sd]?laed|merge_ker|scale_max)", name))
        or "stedc_params_" in args
    )
    set_element_type(k, args, real_only=stedc)
    k.short = squash(f"cuSOLVER {upper(k.precision)} {_OPS[op]}: {name}")
    return True


def _routine(name: str, path: str, full: str) -> tuple[str, str] | None:
    """(op, meaning) when the kernel is cuSOLVER's, else None."""
    if name in _GENERIC_NAMES:
        for struct, op, meaning in _PARAMS:
            if struct + "<" in full:
                return op, f"{name} step of {meaning}"
        if not path.startswith(
            ("kernel::", "cusolver")
        ):  # cuSOLVER's geev kernels live in namespace 'kernel'
            return None
    hit = routine_of(_ROUTINES, name)
    if hit:
        return hit
    if path.startswith("cusolver::"):
        return "helper", f"cuSOLVER internal kernel ({path})"
    return None
