"""The profile's Rate column against ``%gputime`` for the same GEMM. Run on a GPU host:

    python benchmarks/rates_check.py [--size 8192] [--calls 10] [--preheat 0] [--json PATH]

In one IPython shell: ``%gputime -o`` of an N^3 bf16 matmul (its counted FLOPs over its median
per-call time, and over its kernel time per call), then ``%%gpuprofile`` of ten of them: the GEMM
row's rate (the op's counted FLOPs over the kernel's own time). Side by side, with their ratio:
the kernel-time figures should agree within 2%; the per-call figure is lower by the gaps between
calls. Then ``gpumagic.replay`` of that row: its kernel time per call against the row's own
(target within 5%). Prints a table and writes JSON.

A GPU at its power cap runs a long GEMM loop at a lower SM clock than a short burst (an H200: 1485
against 1980 MHz), and ``%gputime`` runs for seconds while a profile of ten GEMMs lasts 15 ms, so
the two see different clocks. ``--preheat S`` runs S seconds of the same GEMM before each of the
three measurements and ``--calls N`` profiles N of them, so that all three run at the prevailing
clock; the SM clock is sampled (NVML, every 5 ms) through each, and the ratios are also given at
equal clocks (time scaled by the mean clock: a compute-bound kernel's time goes as 1/clock).
"""

from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--calls", type=int, default=10, help="GEMMs in the profiled cell")
    ap.add_argument("--preheat", type=float, default=0.0, help="seconds of GEMMs before each")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "rates_check.json"))
    args = ap.parse_args()
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    n = args.size
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.run_line_magic("config", "GpuMagics.history = ''")
    ip.run_cell(f"import torch\na = torch.randn({n}, {n}, device='cuda', dtype=torch.bfloat16)")
    clock = _Clock()

    def preheat() -> None:
        ip.run_cell(
            f"import time\n_t = time.perf_counter()\nwhile time.perf_counter() - _t < {args.preheat}:"
            "\n    _ = a @ a\ntorch.cuda.synchronize()"
        )

    preheat()
    with clock.phase("gputime"):
        r = ip.run_line_magic("gputime", "-o -q a @ a")
    flops = 2.0 * n**3
    per_call = flops / r.median
    per_kernel = flops / r.kernel_time if r.kernel_time else None
    preheat()
    with capture_output(), clock.phase("profile"):
        ip.run_cell_magic(
            "gpuprofile",
            "-w 2 -o rep --no-timeline",
            f"for _ in range({args.calls}):\n    c = a @ a",
        )
    rates = ip.user_ns["rep"].rates()
    gemm = rates.loc[rates["flop_rate"].idxmax()]
    row = float(gemm["flop_rate"])
    out = {
        "device": r.device,
        "size": n,
        "gputime_line": r.line(),
        "gputime_per_call_flop_rate": per_call,
        "gputime_kernel_flop_rate": per_kernel,
        "profile_row": {
            k: (v if isinstance(v, str) else float(v))
            for k, v in gemm.items()
            if v is not None and v == v
        },
        "ratio_kernel": row / per_kernel if per_kernel else None,
        "ratio_per_call": row / per_call,
    }
    print(r.line())
    print(f"{'':36}{'TFLOP/s':>10}{'row / it':>10}")
    print(f"{'%gputime, per call (median)':36}{per_call / 1e12:10.1f}{row / per_call:10.3f}")
    if per_kernel:
        print(
            f"{'%gputime, kernel time per call':36}{per_kernel / 1e12:10.1f}{row / per_kernel:10.3f}   (target 0.98-1.02)"
        )
    print(f"{'%%gpuprofile GEMM row':36}{row / 1e12:10.1f}   {gemm['Name'][:60]}")
    import gpumagic

    rep = ip.user_ns["rep"]
    preheat()
    with clock.phase("replay"):
        again = gpumagic.replay(rep, str(gemm["Name"]))
    op = gpumagic.api.replay.replayed_op(rep.trace, str(gemm["Name"]))
    own = op["kernel_ns"] / 1e9
    replayed = again.kernel_time or again.median
    out["replay"] = {"line": again.line(), "row_s": own, "replayed_s": replayed}
    out["replay"]["ratio"] = replayed / own
    print(
        f"replay of the GEMM row: {replayed * 1e3:.3f} ms a call against the row's {own * 1e3:.3f} ms"
        f" (ratio {replayed / own:.3f}, target 0.95-1.05)"
    )
    print(again.line())
    mhz = clock.means()
    out["sm_clock_mhz"] = mhz
    out["calls"], out["preheat_s"] = args.calls, args.preheat
    if all(mhz.get(k) for k in ("gputime", "profile", "replay")):
        # a compute-bound kernel's time scales as 1/clock: the ratios at equal clocks
        at_equal = (row / mhz["profile"]) / ((per_kernel or per_call) / mhz["gputime"])
        replay_equal = (replayed * mhz["replay"]) / (own * mhz["profile"])
        out["ratio_kernel_equal_clock"], out["replay"]["ratio_equal_clock"] = at_equal, replay_equal
        print(
            f"mean SM clock: %gputime {mhz['gputime']:.0f} MHz, profile {mhz['profile']:.0f} MHz, "
            f"replay {mhz['replay']:.0f} MHz; at equal clocks: row / %gputime {at_equal:.3f}, "
            f"replay / row {replay_equal:.3f}"
        )
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, default=str)
    print(f"wrote {args.json}")


class _Clock:
    """The SM clock sampled every 5 ms through each named phase (NVML; nothing where none)."""

    def __init__(self) -> None:
        import threading

        import torch

        from gpumagic.timing.smclock import open_reader

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.reader = open_reader(
            str(getattr(props, "uuid", "") or ""), torch.cuda.current_device()
        )
        self.samples: dict[str, list[int]] = {}
        self._threading = threading

    def phase(self, name: str):
        import contextlib
        import time

        @contextlib.contextmanager
        def sampling():
            done = self._threading.Event()
            got = self.samples.setdefault(name, [])

            def run() -> None:
                while not done.is_set() and self.reader is not None:
                    mhz = self.reader.mhz()
                    if mhz:
                        got.append(mhz)
                    time.sleep(0.005)

            t = self._threading.Thread(target=run, daemon=True)
            t.start()
            try:
                yield
            finally:
                done.set()
                t.join()

        return sampling()

    def means(self) -> dict[str, float]:
        return {k: sum(v) / len(v) for k, v in self.samples.items() if v}


if __name__ == "__main__":
    main()
