"""Held-out kernel names: FFT, linear-algebra, sparse and BLAS ops that harvest_kernels.py never
runs.

    python3 tests/data/capture/harvest_heldout.py OUT.json

tests/data/kernel_names_heldout.json keeps those of its names that the decoder was not written
against, each with the library and op it belongs to, annotated from the workload and the libraries'
API rather than from the decoder.
"""

import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

dev = "cuda"
W = {}


def workload(f):
    W[f.__name__] = f
    return f


def r(*s, dtype=torch.float32):
    return torch.randn(*s, device=dev, dtype=dtype)


@workload
def fft_more():
    torch.fft.hfft(torch.randn(4097, device=dev, dtype=torch.complex64))
    torch.fft.ihfft(r(3 * 5 * 7 * 11))
    torch.fft.fftn(torch.randn(16, 24, 40, device=dev, dtype=torch.complex64))
    torch.fft.fft(r(1 << 20))
    torch.fft.ifft(torch.randn(6000, device=dev, dtype=torch.complex128))
    torch.stft(
        r(16000),
        400,
        hop_length=160,
        window=torch.hann_window(400, device=dev),
        return_complex=True,
    )
    torch.fft.irfft2(torch.randn(256, 129, device=dev, dtype=torch.complex64))
    torch.fft.rfft(r(8, 2**13), dim=-1)
    torch.fft.fft(r(13 * 13 * 17))


@workload
def linalg_more():
    torch.backends.cuda.preferred_linalg_library("cusolver")
    a = r(64, 64, 64) + 64 * torch.eye(64, device=dev)
    spd = a @ a.transpose(1, 2)
    torch.linalg.cholesky_ex(spd)
    torch.cholesky_solve(r(64, 64, 4), torch.linalg.cholesky(spd))
    torch.linalg.svd(r(1024, 1024))
    torch.linalg.pinv(r(300, 200))
    torch.linalg.matrix_rank(r(128, 96))
    lu, piv = torch.linalg.lu_factor(r(768, 768).double())
    torch.linalg.lu_solve(lu, piv, r(768, 16).double())
    torch.linalg.eigvalsh(r(1500, 1500) + r(1500, 1500).T)
    torch.linalg.qr(r(32, 64, 48))
    torch.linalg.inv_ex(torch.randn(16, 32, 32, device=dev, dtype=torch.complex64))
    torch.linalg.solve(
        torch.randn(200, 200, device=dev, dtype=torch.complex128),
        torch.randn(200, 3, device=dev, dtype=torch.complex128),
    )
    torch.linalg.ldl_factor(spd[0])
    torch.linalg.householder_product(*torch.geqrf(r(256, 128)))
    torch.linalg.cholesky(spd[0].double() + 0)
    torch.linalg.eigh(r(2048, 2048) + r(2048, 2048).T)


@workload
def sparse_more():
    d = r(2048, 2048) * (torch.rand(2048, 2048, device=dev) < 0.005)
    csr = d.to_sparse_csr()
    csr @ csr
    torch.sparse.sampled_addmm(csr, r(2048, 64), r(64, 2048))
    bsr = (r(1024, 1024) * (torch.rand(1024, 1024, device=dev) < 0.05)).to_sparse_bsr((32, 32))
    bsr @ r(1024, 128)
    torch.sparse.mm(d.to_sparse(), d.to_sparse())
    (csr + csr).to_dense()
    csr.to(torch.float16) @ r(2048, 64, dtype=torch.float16)


@workload
def blas_more():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.outer(r(4096), r(4096))
    x = torch.randn(1 << 16, device=dev, dtype=torch.complex64)
    torch.vdot(x, x)
    torch.baddbmm(
        torch.randn(64, 48, 48, device=dev, dtype=torch.complex64),
        torch.randn(64, 48, 32, device=dev, dtype=torch.complex64),
        torch.randn(64, 32, 48, device=dev, dtype=torch.complex64),
    )
    r(4096, 4096, dtype=torch.float64) @ r(4096, dtype=torch.float64)
    r(2048, 3, dtype=torch.float64).T @ r(2048, 3, dtype=torch.float64)
    torch.addmm(r(3000, 5), r(3000, 700), r(700, 5))
    r(1, 8192) @ r(8192, 8192)
    r(513, 257, dtype=torch.float16) @ r(257, 129, dtype=torch.float16)
    torch.bmm(r(4096, 4, 4, dtype=torch.float64), r(4096, 4, 4, dtype=torch.float64))


def main(out):
    seen = {}
    for name, fn in W.items():
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a workload this stack lacks is skipped, the rest still run
            print(name, "warm-up failed", repr(e)[:200])
    for name, fn in W.items():
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - as above
            print(name, "failed", repr(e)[:200])
            continue
        for ev in prof.profiler.kineto_results.events():
            if str(ev.device_type()).endswith("CUDA"):
                seen.setdefault(ev.name(), {"name": ev.name(), "workload": name})
    with open(out, "w") as f:
        json.dump(list(seen.values()), f, indent=1)
    print(len(seen), "names")


main(sys.argv[1])
