"""Headline figures on work the counters were not written against: counted FLOPs and bytes beside
the closed form.

    python benchmarks/heldout_figures.py [--json PATH]     (default PATH: $OUT/heldout_figures.json,
    else ./)

Each row is one ``%gputime -o`` in one IPython shell: the line a user reads, the FLOPs and bytes
``count_work`` counted for one call, the closed-form count of the work the kernel does, their ratio
(1.000 is right), and the share of the applicable peak the line printed. Attention is counted over
the (query, key) pairs the kernel computes: causal keeps L(L+1)/2 of L^2 (diagonal included,
top-left aligned as SDPA's ``is_causal``), a sliding window of W keeps sum(min(i+1, W)), GQA
computes every query head against its group's key head. A fused norm reads its input and weight once
and writes its output once. On the CPU it runs the same ops smaller (no shares).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def causal_pairs(lq: int, lk: int) -> int:
    return sum(min(i + 1, lk) for i in range(lq))


def window_pairs(lq: int, w: int) -> int:
    return sum(min(i + 1, w) for i in range(lq))


def cases(dev: str, big: bool) -> list[tuple[str, str, dict, int | None, int | None]]:
    """(name, statement, namespace, closed-form FLOPs, closed-form bytes) per row; None where not
    checked."""
    import torch.nn.functional as F

    B, H, L, E = (8, 16, 2048, 128) if big else (2, 4, 256, 64)
    out: list[tuple[str, str, dict, int | None, int | None]] = []
    for dt in (torch.float16, torch.bfloat16):
        q, k, v = (torch.randn(B, H, L, E, device=dev, dtype=dt) for _ in range(3))
        name = str(dt).removeprefix("torch.")
        ns = {"F": F, "q": q, "k": k, "v": v}
        out.append(
            (
                f"sdpa causal {name}",
                "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                ns,
                4 * B * H * E * causal_pairs(L, L),
                None,
            )
        )
    q, k, v = (torch.randn(B, H, L, E, device=dev, dtype=torch.bfloat16) for _ in range(3))
    ns = {"F": F, "q": q, "k": k, "v": v}
    out.append(
        (
            "sdpa full bf16",
            "F.scaled_dot_product_attention(q, k, v)",
            ns,
            4 * B * H * E * L * L,
            None,
        )
    )
    kv_heads = H // 4
    kg, vg = (torch.randn(B, kv_heads, L, E, device=dev, dtype=torch.bfloat16) for _ in range(2))
    ns = {"F": F, "q": q, "k": kg, "v": vg}
    out.append(
        (
            "sdpa GQA causal bf16",
            "F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)",
            ns,
            4 * B * H * E * causal_pairs(L, L),
            None,
        )
    )
    w = L // 4
    i = torch.arange(L, device=dev)
    mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < w)
    ns = {"F": F, "q": q, "k": k, "v": v, "mask": mask}
    out.append(
        (
            "sdpa sliding-window mask bf16",
            "F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
            ns,
            4 * B * H * E * window_pairs(L, w),
            None,
        )
    )
    n, d = (8192, 4096) if big else (512, 256)
    x = torch.randn(n, d, device=dev, dtype=torch.bfloat16)
    wgt = torch.randn(d, device=dev, dtype=torch.bfloat16)
    ns = {"F": F, "x": x, "w": wgt}
    out.append(
        ("rms_norm bf16", "F.rms_norm(x, (x.shape[-1],), w)", ns, None, 2 * x.nbytes + wgt.nbytes)
    )
    out.append(
        (
            "layer_norm bf16",
            "F.layer_norm(x, (x.shape[-1],), w)",
            ns,
            None,
            2 * x.nbytes + wgt.nbytes,
        )
    )
    m = 8192 if big else 512
    a, b = (torch.randn(m, m, device=dev, dtype=torch.bfloat16) for _ in range(2))
    out.append(("matmul bf16", "a @ b", {"a": a, "b": b}, 2 * m**3, 3 * a.nbytes))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "heldout_figures.json")
    )
    args = parser.parse_args()
    from IPython.core.interactiveshell import InteractiveShell

    import gpumagic

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    rows = []
    print(
        f"gpumagic {gpumagic.__version__} | torch {torch.__version__} | {dev}"
        + (f" {torch.cuda.get_device_name()}" if dev == "cuda" else "")
    )
    print(f"{'case':32} {'FLOPs ratio':>11} {'bytes ratio':>11}  line")
    for name, stmt, ns, flops, nbytes in cases(dev, dev == "cuda"):
        shell.user_ns.update(ns)
        r = shell.run_line_magic("gputime", f"-q -o {stmt}")
        work = r.work
        ach = r.achieved
        row = {
            "case": name,
            "statement": stmt,
            "line": str(r),
            "counted_flops": getattr(work, "flops", None),
            "counted_bytes": getattr(work, "bytes", None),
            "closed_form_flops": flops,
            "closed_form_bytes": nbytes,
            "flop_ratio": work.flops / flops if flops and work and work.flops else None,
            "byte_ratio": work.bytes / nbytes if nbytes and work and work.bytes else None,
            "flop_share": getattr(ach, "flop_share", None) if ach else None,
            "byte_share": getattr(ach, "byte_share", None) if ach else None,
            "note": getattr(work, "note", ""),
        }
        rows.append(row)
        fr = f"{row['flop_ratio']:.3f}" if row["flop_ratio"] else "—"
        br = f"{row['byte_ratio']:.3f}" if row["byte_ratio"] else "—"
        print(f"{name:32} {fr:>11} {br:>11}  {row['line']}")
    pathlib.Path(args.json).write_text(
        json.dumps({"device": dev, "rows": rows}, indent=1, default=str)
    )
    print("wrote", args.json)


if __name__ == "__main__":
    main()
