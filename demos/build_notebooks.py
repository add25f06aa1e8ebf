"""Write the demo notebooks (unexecuted) from the cell lists below: python demos/build_notebooks.py
[--force]

A notebook that is already committed executed (01 and 02 were run on a GPU) is kept as it is unless
--force is given; the others are rewritten, keeping their cells' ids so that a rebuild shows only
what changed.

Each notebook retraces one finding of the "from torch.matmul to the silicon" series. Every one runs
on the CPU too (smaller sizes; GPU-only cells say they were skipped), so CI executes all of them.
"""

from __future__ import annotations

import pathlib
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = pathlib.Path(__file__).parent

SETUP = (
    "%load_ext gpumagic\n"
    "import torch\n"
    'device = "cuda" if torch.cuda.is_available() else "cpu"\n'
    'print("device:", torch.cuda.get_device_name() if device == "cuda" '
    'else "CPU (no CUDA here: GPU-only cells are skipped)")'
)

NOTEBOOKS = {
    "01_gpu_is_real": [
        (
            "md",
            "# 1. The GPU is real, and `%timeit` does not see it\n\n"
            "A matmul on the GPU returns before the work is done: "
            "the host only *launches* it. `%timeit` times the launch; `%gputime` "
            "synchronizes, warms up and times the "
            "work with CUDA events.",
        ),
        ("code", SETUP),
        (
            "code",
            "N = 4096 if device == 'cuda' else 512\nA = torch.randn(N, N, device=device)\n"
            "B = torch.randn(N, N, device=device)",
        ),
        (
            "md",
            "**Look at:** the first call. It pays for CUDA context creation, cuBLAS "
            "heuristics and kernel loading "
            "(the series saw 189 ms cold vs 3.7 ms warm on a GB10).",
        ),
        (
            "code",
            "cold = %gputime -o -q torch.matmul(A, B)\n"
            "print(f'first call {cold.first_call * 1e3:.1f} ms, steady {cold.median * "
            "1e3:.3f} ms '\n"
            "      f'({cold.first_call / cold.median:.0f}x)')",
        ),
        (
            "md",
            "**Look at:** the spread and the value. On a GPU `%timeit` reports the launch "
            "time, often with a "
            "'slowest run took N times longer' warning.",
        ),
        ("code", "%timeit -n 10 -r 3 A @ B"),
        ("md", "**Look at:** one honest line: median ± IQR, samples × calls, GPU busy share."),
        ("code", "%gputime A @ B"),
        (
            "md",
            "A tiny op is a different story: the GPU finishes faster than the host can "
            "launch. The line says "
            "*launch-bound* and gives both numbers; `--graph` replays the calls from a CUDA graph.",
        ),
        ("code", "x = torch.randn(65536, device=device)\n%gputime x + 1"),
        (
            "code",
            "if device == 'cuda':\n    get_ipython().run_line_magic('gputime', '--graph x + "
            "1')\nelse:\n"
            "    print('--graph needs CUDA: skipped on CPU')",
        ),
    ],
    "02_kernels_have_names": [
        (
            "md",
            "# 2. Kernels have names\n\nBuild a transformer block one operation at a time "
            "and watch which kernel "
            "each step adds. Every name is decoded: library, SM target, tensor cores or not, "
            "precision, tile, layout.",
        ),
        (
            "code",
            SETUP
            + "\nfrom gpumagic import decode_kernel\nseen = set()\n\ndef new_kernels(report):\n"
            "    names = [n for n in report.trace.kernel_summary()['Name'] if n not in "
            "seen]\n    seen.update(names)\n"
            "    for n in names:\n        k = decode_kernel(n)\n"
            "        print(f'{k.short:<60} {k.family:<14} tensor cores: {k.tensor_cores}')\n"
            "    if not names:\n        print('(no new GPU kernels' + (')' if device == "
            "'cuda' else ': CPU only)'))",
        ),
        (
            "code",
            "# the series' block: batch 16, seq 512, hidden 4096, FFN 16384 (smaller on the CPU)\n"
            "b, s, h, f = (16, 512, 4096, 16384) if device == 'cuda' else (2, 64, 128, 512)\n"
            "x = torch.randn(b, s, h, device=device)\nWqkv = torch.randn(h, 3 * h, "
            "device=device) * 0.02\n"
            "W1 = torch.randn(h, f, device=device) * 0.02\nW2 = torch.randn(f, h, "
            "device=device) * 0.02",
        ),
        (
            "md",
            "**Step 1, a matmul.** One GEMM kernel: an fp32 GEMM on the FFMA path unless "
            "TF32 is enabled.",
        ),
        ("code", "%%gpuprofile --no-timeline -o r\ny = x @ W1"),
        ("code", "new_kernels(r)"),
        ("md", "**Step 2, + ReLU.** An elementwise kernel appears."),
        ("code", "%%gpuprofile --no-timeline -o r\ny = torch.relu(x @ W1)"),
        ("code", "new_kernels(r)"),
        ("md", "**Step 3, + residual.** Another elementwise kernel: an add."),
        ("code", "%%gpuprofile --no-timeline -o r\ny = (torch.relu(x @ W1) @ W2) + x"),
        ("code", "new_kernels(r)"),
        (
            "md",
            "**Step 4, QKV and QKᵀ.** The transposed operand changes the GEMM's layout "
            "letters (`tn`).",
        ),
        (
            "code",
            "%%gpuprofile --no-timeline -o r\nq, k, v = (x @ Wqkv).split(h, dim=-1)\n"
            "scores = q @ k.transpose(-2, -1) / h ** 0.5",
        ),
        ("code", "new_kernels(r)"),
        ("md", "**Step 5, softmax.**"),
        ("code", "%%gpuprofile --no-timeline -o r\nattn = torch.softmax(scores, dim=-1)"),
        ("code", "new_kernels(r)"),
        ("md", "**The full block.** Look at the findings and at the GEMM share of GPU time."),
        (
            "code",
            "%%gpuprofile --no-timeline -o block\nq, k, v = (x @ Wqkv).split(h, dim=-1)\n"
            "attn = torch.softmax(q @ k.transpose(-2, -1) / h ** 0.5, dim=-1)\n"
            "hidden = attn @ v + x\nout = torch.relu(hidden @ W1) @ W2 + hidden",
        ),
        (
            "code",
            "ks = block.kernel_summary()\ngemm = ks[ks['Op'] == 'gemm']['Time (%)'].sum() if "
            "len(ks) else 0.0\n"
            "print(f'{len(ks)} distinct kernels; GEMMs take {gemm:.0f}% of GPU time')",
        ),
    ],
    "03_nsys_in_the_notebook": [
        (
            "md",
            "# 3. Nsight Systems in the notebook\n\n"
            "`%%gpuprofile --nsys` re-runs the cell in a subprocess under `nsys`, "
            "in this same container, with the cell's tensors shipped over. Only the cell's "
            "NVTX range is captured: "
            "the warm-up is not in the report.",
        ),
        (
            "code",
            SETUP
            + "\nimport shutil\nhave_nsys = device == 'cuda' and shutil.which('nsys') is not None\n"
            "print('nsys:', shutil.which('nsys') or 'not found (the --nsys cells are skipped)')",
        ),
        (
            "code",
            "b, s, h, f = (16, 512, 4096, 16384) if device == 'cuda' else (2, 64, 128, 512)\n"
            "x = torch.randn(b, s, h, device=device)\nWqkv = torch.randn(h, 3 * h, "
            "device=device) * 0.02\n"
            "W1 = torch.randn(h, f, device=device) * 0.02\nW2 = torch.randn(f, h, "
            "device=device) * 0.02\n"
            "cell = '''q, k, v = (x @ Wqkv).split(h, dim=-1)\n"
            "attn = torch.softmax(q @ k.transpose(-2, -1) / h ** 0.5, dim=-1)\n"
            "hidden = attn @ v + x\nout = torch.relu(hidden @ W1) @ W2 + hidden'''",
        ),
        (
            "md",
            "**Look at:** the CUDA API table (with warm-up, the one-time `cuLibraryLoadData` "
            "module loading "
            "dominates), the memory operations and the OS-runtime calls.",
        ),
        (
            "code",
            "if have_nsys:\n    get_ipython().run_cell_magic('gpuprofile', '--nsys -w 1 -o "
            "warm', cell)\nelse:\n"
            "    print('skipped: needs CUDA and nsys')",
        ),
        ("md", "**Warm-up off:** the first-call costs land inside the capture."),
        (
            "code",
            "if have_nsys:\n    get_ipython().run_cell_magic('gpuprofile', '--nsys -w 0 "
            "--no-timeline -o cold', cell)\n"
            "    print(cold.trace.api_summary().head(5)[['Time (%)', 'Total Time (ns)', 'Num "
            "Calls', 'Name']])\n"
            "else:\n    print('skipped: needs CUDA and nsys')",
        ),
        ("md", "Without nsys, the same views come from torch.profiler:"),
        ("code", "get_ipython().run_cell_magic('gpuprofile', '', cell)"),
    ],
    "04_overhead_vs_compute": [
        (
            "md",
            "# 4. Overhead-bound vs compute-bound\n\nA small matmul + bias spends its time "
            "in the host (Python, "
            "dispatch, launch): Self CPU far above GPU time. A large one keeps the GPU busy. "
            "`torch.compile` cuts "
            "the host work.",
        ),
        ("code", SETUP),
        (
            "code",
            "def layer(x, w, b):\n    return x @ w + b\n\n"
            "small = [torch.randn(64, 64, device=device) for _ in range(2)] + "
            "[torch.randn(64, device=device)]\n"
            "N = 4096 if device == 'cuda' else 512\n"
            "large = [torch.randn(N, N, device=device) for _ in range(2)] + [torch.randn(N, "
            "device=device)]",
        ),
        (
            "md",
            "**Look at:** the findings. At 64 the GPU is idle most of the time: "
            "overhead-bound. On a GPU the "
            "timeline shows it: short kernels on the GPU stream, long gaps between them "
            "while the CPU ops run.",
        ),
        ("code", "%%gpuprofile -n 20 -o r_small\ny = layer(*small)"),
        ("md", "**At the large size** the GPU is busy; the GEMM dominates."),
        ("code", "%%gpuprofile -o r_large\ny = layer(*large)"),
        (
            "code",
            "print(r_small.trace.op_summary().head(4)[['Name', 'Calls', 'Self CPU (ns)', "
            "'GPU (ns)']])",
        ),
        (
            "md",
            "**torch.compile** fuses the bias into the GEMM's epilogue or a Triton kernel "
            "(GPU only here: compiling "
            "on the CPU takes long).",
        ),
        (
            "code",
            "if device == 'cuda':\n    clayer = torch.compile(layer)\n    clayer(*small)\n"
            "    get_ipython().run_cell_magic('gpuprofile', '-n 20', 'y = clayer(*small)')\n"
            "    get_ipython().run_line_magic('gputime', 'layer(*small)')\n"
            "    get_ipython().run_line_magic('gputime', 'clayer(*small)')\n"
            "else:\n    print('torch.compile comparison skipped on CPU')",
        ),
        (
            "md",
            "## Where the time goes in your code\n\nA training step reads as one line that "
            "costs everything if the backward is put on `loss.backward()`. `%%gpuprofile` puts "
            "each kernel on the module and the line of the cell that caused it, the backward on "
            "the forward line and module whose autograd node produced it. The model is created "
            "in an earlier cell: the magic marks the models the namespace holds when the cell "
            "starts.",
        ),
        (
            "code",
            "torch.manual_seed(0)\n"
            "width = 1024 if device == 'cuda' else 128\n"
            "model = torch.nn.Sequential(\n"
            "    torch.nn.Linear(width, 4 * width), torch.nn.GELU(),\n"
            "    torch.nn.Linear(4 * width, width),\n"
            "    torch.nn.LayerNorm(width), torch.nn.Linear(width, 10),\n"
            ").to(device)\n"
            "opt = torch.optim.AdamW(model.parameters())\n"
            "xb = torch.randn(256, width, device=device)\n"
            "yb = torch.randint(0, 10, (256,), device=device)",
        ),
        (
            "code",
            "%%gpuprofile -o r_train --no-timeline\n"
            "opt.zero_grad(set_to_none=True)\n"
            "loss = torch.nn.functional.cross_entropy(model(xb), yb)\n"
            "loss.backward()\n"
            "opt.step()",
        ),
        (
            "md",
            "**Look at:** the by-module rows (forward and backward per layer, the optimizer "
            "outside every module) and the by-line rows: line 2's forward carries its own "
            "backward, and `loss.backward()` itself costs next to nothing. Both are DataFrames "
            "too:",
        ),
        ("code", "r_train.by_module()[['module', 'fwd_ns', 'bwd_ns', 'share']]"),
        ("code", "r_train.by_line()[['line', 'source', 'fwd_ns', 'bwd_ns', 'share']]"),
        (
            "md",
            "**What fills the memory** (CUDA only: the caching allocator's history): every block "
            "named, parameters, gradients and AdamW's state by their names, activations by the "
            "module whose forward made them, and what would change the peak, as estimates.",
        ),
        (
            "code",
            "if device == 'cuda':\n"
            "    get_ipython().run_cell_magic('gpuprofile', '--memory',\n"
            "        'opt.zero_grad(set_to_none=True)\\n'\n"
            "        'torch.nn.functional.cross_entropy(model(xb), yb).backward()\\n'\n"
            "        'opt.step()')\n"
            "else:\n"
            "    print('--memory reads the CUDA caching allocator: skipped on CPU')",
        ),
    ],
    "05_tensor_cores": [
        (
            "md",
            "# 5. Tensor cores\n\n"
            "The same matmul in fp32 (FFMA on CUDA cores), TF32 and bf16 (tensor cores), "
            "timed against each other "
            "with `%%gputime --compare`: one statement per line, a `# label` comment names "
            "it. The statements are "
            "timed interleaved, one sample of each per round, so a GPU clock that falls "
            "under sustained load falls "
            "on all of them alike. Then the kernels say why the times differ.",
        ),
        (
            "code",
            SETUP + "\nfrom gpumagic import decode_kernel\nfrom gpumagic.capture.torch.backend "
            "import capture",
        ),
        (
            "code",
            "N = 4096 if device == 'cuda' else 256\nA = torch.randn(N, N, device=device)\nAb "
            "= A.bfloat16()",
        ),
        (
            "md",
            "**fp32 vs TF32 vs bf16.** TF32 is a global switch, so the two fp32 statements "
            "set it themselves (a "
            "host write of nanoseconds beside a matmul of milliseconds). Speed-ups are "
            "against the first line; "
            "`--baseline bf16` would take them against bf16. `-o` makes the comparison the "
            "cell's value.",
        ),
        (
            "code",
            "%%gputime -o --compare\n"
            "torch.backends.cuda.matmul.allow_tf32 = False; A @ A  # fp32\n"
            "torch.backends.cuda.matmul.allow_tf32 = True; A @ A   # tf32\n"
            "Ab @ Ab                                                # bf16",
        ),
        (
            "md",
            "**The figures as data.** `to_dataframe()` has the exact medians, rates and "
            "speed-ups (the baseline's "
            "median over each one's).",
        ),
        (
            "code",
            "cmp = _\ntorch.backends.cuda.matmul.allow_tf32 = False\ndf = cmp.to_dataframe()\n"
            "print(f\"bf16 is {cmp.speedup('bf16'):.1f}x faster than fp32 here\")\n"
            "df[['label', 'median', 'kernel_time', 'flop_rate', 'flop_share', 'speedup']]",
        ),
        (
            "md",
            "**Why: the kernels.** Each variant once under torch.profiler; its main kernel's "
            "name decoded. Look for "
            "`ffma`/`simt` (CUDA cores) against `tf32`, `bf16` and tensor cores.",
        ),
        (
            "code",
            "variants = (('fp32', 'A @ A', False), ('tf32', 'A @ A', True), ('bf16', 'Ab @ "
            "Ab', False))\n"
            "for label, stmt, tf32 in variants:\n"
            "    if device != 'cuda':\n"
            "        print(f'{label}: kernel names need CUDA (skipped on CPU)')\n"
            "        continue\n"
            "    torch.backends.cuda.matmul.allow_tf32 = tf32\n"
            "    kernels = capture(stmt, label, namespace=globals()).trace.kernel_summary()\n"
            "    k = decode_kernel(kernels['Name'].iloc[0])\n"
            "    print(f'{label:<5} {k.short}: tensor cores {k.tensor_cores}, precision "
            "{k.precision}')\n"
            "torch.backends.cuda.matmul.allow_tf32 = False",
        ),
    ],
    "06_roofline": [
        (
            "md",
            "# 6. How far from the hardware\n\n"
            "A time per call says how long; the work of a call says how fast. `count_work` "
            "counts the FLOPs "
            "(PyTorch's `FlopCounterMode`: matmul, conv, attention) and the bytes each op "
            "reads and writes (a lower "
            "bound on memory traffic) of one call; `achieved` turns them and the median into "
            "TFLOP/s and GB/s, "
            "each as a share of the peak that applies: FFMA for fp32, the tensor cores for "
            "TF32 and bf16, the "
            "memory's bandwidth for an add or a softmax.",
        ),
        (
            "code",
            SETUP
            + "\nimport pandas as pd\nimport gpumagic\nfrom gpumagic.device_peaks import achieved\n"
            "from gpumagic.timing.work import count_work\n"
            "name = torch.cuda.get_device_name() if device == 'cuda' else 'CPU'",
        ),
        (
            "md",
            "**The ceilings.** Dense datasheet peaks (NVIDIA prints tensor-core figures with "
            "2:4 sparsity: halved "
            "here). This device, if the table knows it, is marked with `*`.",
        ),
        ("code", "gpumagic.peaks()"),
        (
            "md",
            "**What this chip reaches.** A datasheet peak is a boost-clock product; "
            "`measure_peak()` times a large "
            "GEMM per precision and a large copy once, and caches the result (GPU only).",
        ),
        (
            "code",
            "if device == 'cuda':\n    measured = gpumagic.measure_peak()\n    "
            "print(measured)\nelse:\n"
            "    measured = None\n    print('measure_peak() needs a GPU: skipped on CPU')",
        ),
        (
            "code",
            "N = 8192 if device == 'cuda' else 256\nA = torch.randn(N, N, device=device)\nAb "
            "= A.bfloat16()\n"
            "n = (1 << 26) if device == 'cuda' else (1 << 16)\n"
            "x, y = torch.randn(n, device=device), torch.randn(n, device=device)\n"
            "S = torch.randn(N, N, device=device, dtype=torch.bfloat16)\n"
            "rows, points = [], []\n\n"
            "def rate(label, stmt, tf32=False, elementwise_flops=0):\n"
            "    torch.backends.cuda.matmul.allow_tf32 = tf32\n"
            "    t = get_ipython().run_line_magic('gputime', f'-o -q {stmt}')\n"
            "    w = count_work(lambda: eval(stmt, globals()))\n"
            "    torch.backends.cuda.matmul.allow_tf32 = False\n"
            "    a = achieved(w, t.median, name)\n"
            "    rows.append({'op': label, 'per call': t.line().split(' per call')[0], "
            "'FLOPs': w.flops,\n"
            "                 'bytes': w.bytes, 'precision': w.precision_class, 'achieved': "
            "a.segment(),\n"
            "                 'limiter': a.limiter()})\n"
            "    # elementwise ops count no FLOPs in FlopCounterMode; for the picture, count "
            "them per element\n"
            "    flops = w.flops or elementwise_flops\n"
            "    points.append((label, flops / w.bytes, flops / t.median, a))\n"
            "    return a",
        ),
        (
            "md",
            "**fp32 vs TF32 vs bf16, and two memory-bound ops.** Look at the share column: "
            "the same matmul is "
            "compared with a different ceiling in each precision.",
        ),
        (
            "code",
            "rate('fp32 matmul', 'A @ A')\nrate('tf32 matmul', 'A @ A', "
            "tf32=True)\nrate('bf16 matmul', 'Ab @ Ab')\n"
            "rate('add', 'x + y', elementwise_flops=n)\n"
            "rate('softmax bf16', 'torch.softmax(S, dim=-1)', elementwise_flops=5 * S.numel())\n"
            "pd.DataFrame(rows)",
        ),
        (
            "md",
            "**The limiter.** Below the ridge point (peak FLOP/s over bandwidth) an op can "
            "at best reach intensity "
            "x bandwidth: memory-bound. Above it, compute-bound. Far below its roof, neither "
            "ceiling holds it.",
        ),
        ("code", "for label, _, _, a in points:\n    print(f'{label:<14} {a.explain()}')"),
        (
            "md",
            "**The roofline.** Each op a point (intensity from the counted bytes, a lower "
            "bound on traffic, so the "
            "points sit at or right of their true place); the device's ceilings as lines. "
            "The add counts 1 FLOP "
            "per element, the softmax 5 (max, subtract, exp, sum, divide).",
        ),
        (
            "code",
            "from gpumagic import roofline\n\n"
            "roofline(points, name)  # under the datasheet's ceilings; BokehJS once per notebook",
        ),
        (
            "md",
            "**Nsight Compute** measures what the counting can only bound: the real DRAM "
            "traffic, and the limiter "
            "per kernel. `%%gpuprofile --ncu` re-runs a cell under ncu (GPU with Nsight "
            "Compute only).",
        ),
        (
            "code",
            "import shutil\nif device == 'cuda' and shutil.which('ncu'):\n    try:\n"
            "        get_ipython().run_cell_magic('gpuprofile', '--ncu', 'C = Ab @ Ab\\nz = "
            "x + y')\n"
            "    except Exception as exc:  # an older gpumagic without --ncu, or counters "
            "not permitted\n"
            "        print('--ncu unavailable here:', str(exc).splitlines()[0])\nelse:\n"
            "    print('skipped: --ncu needs CUDA and Nsight Compute')",
        ),
    ],
    "07_sweep": [
        (
            "md",
            "# 7. Over sizes: where each precision reaches its ceiling, where an add stops "
            "being launch-bound\n\n"
            "`%%gputime --sweep n=VALUES` runs the setup line and times the cell at each "
            "value: a table of every "
            "point, and a plot of TFLOP/s (GB/s for a memory-bound op) against `n` with the "
            "device's peak as a "
            "dashed line. Each point stops on `%gputime`'s own rule; a fast point gets a "
            "shorter budget. The values "
            "are Python read in the notebook, so a list defined in a cell will do.",
        ),
        ("code", SETUP),
        (
            "code",
            "sizes = [256, 512, 1024, 2048, 4096, 8192] if device == 'cuda' else [64, 128, 256]\n"
            "elements = [2**k for k in range(10, 29, 2)] if device == 'cuda' else [2**k for "
            "k in range(10, 21, 2)]",
        ),
        (
            "md",
            "**Matmul, fp32 vs bf16.** With `--compare`, each line of the cell is a "
            "statement of its own: two lines "
            "on the plot. Small matrices leave most of the GPU idle; each precision levels "
            "off at its own ceiling.",
        ),
        (
            "code",
            "%%gputime -o --compare --sweep n=sizes A = torch.randn(n, n, device=device); Ab "
            "= A.bfloat16()\n"
            "A @ A    # fp32\n"
            "Ab @ Ab  # bf16",
        ),
        (
            "code",
            "mm = _\ndf = mm.to_dataframe()\n"
            "for label, rows in df.groupby('label', sort=False):\n"
            "    best = rows['flop_rate'].max()\n"
            "    first = rows[rows['flop_rate'] >= 0.9 * best].iloc[0]\n"
            "    print(f'{label}: {best / 1e12:.3g} TFLOP/s at best; within 10% of it from n "
            "= {first.n}')\n"
            "df[['n', 'label', 'median', 'flop_rate', 'flop_share', 'launch_bound']]",
        ),
        (
            "md",
            "**An add over sizes.** A few thousand elements: the launch costs more than the "
            "work, the time is flat "
            "and the line says launch-bound. Millions: the memory's bandwidth sets the time, "
            "GB/s levels off.",
        ),
        (
            "code",
            "%%gputime -o --sweep n=elements x = torch.randn(n, device=device); y = "
            "torch.randn(n, device=device)\n"
            "x + y",
        ),
        (
            "code",
            "add = _\ndf = add.to_dataframe()\n"
            "bound = df[df['launch_bound'].eq(True)]  # True, False, or None where unknown\n"
            "if len(bound):\n"
            "    print(f'launch-bound up to n = {bound.n.max()}; best {df.byte_rate.max() / "
            "1e9:.0f} GB/s')\n"
            "else:\n    print('no point is launch-bound here (on the CPU nothing is launched)')\n"
            "df[['n', 'median', 'kernel_time', 'byte_rate', 'byte_share', 'launch_bound']]",
        ),
    ],
    "08_two_gpus": [
        (
            "md",
            "# 8. Two GPUs: how much of a step is communication, and does it overlap?\n\n"
            "`%%gpuprofile --nsys --nproc 2` runs the cell as two `torchrun` ranks, one GPU "
            "each, inside one Nsight "
            "Systems run; the cell may use `dist`, `rank`, `local_rank` and `device`. The "
            "report then has a row per "
            "rank: the cell's span, GPU busy time, NCCL time and its share, how much of it "
            "overlapped compute, and "
            "how far the slowest rank trailed. Without two GPUs, the last cells read a "
            "two-rank capture kept with "
            "the tests.",
        ),
        (
            "code",
            SETUP + "\nimport gzip, pathlib, shutil, tempfile\nimport gpumagic\n"
            "from gpumagic.analysis.ranks import rank_figures\nfrom gpumagic.render.report "
            "import ProfileReport\n"
            "ngpu = torch.cuda.device_count() if device == 'cuda' else 0\n"
            "print(f'{ngpu} GPU(s); nsys:', shutil.which('nsys') or 'not found')",
        ),
        (
            "md",
            "**A DDP step from a cell.** The model is built here and shipped to both ranks; "
            "`--setup` wraps it in DDP "
            "once per rank (after the process group is up); the warm-up runs outside the "
            "capture, then three steps "
            "inside it.",
        ),
        (
            "code",
            "model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(4)])\n"
            "setup = ('from torch.nn.parallel import DistributedDataParallel as DDP; '\n"
            "         'ddp = DDP(model.to(device), device_ids=[local_rank]); '\n"
            "         'opt = torch.optim.SGD(ddp.parameters(), lr=1e-3); '\n"
            "         'x = torch.randn(512, 2048, device=device)')\n"
            "step = 'opt.zero_grad()\\nddp(x).square().mean().backward()\\nopt.step()'\n"
            "ddp_report = None\n"
            "if ngpu >= 2 and shutil.which('nsys'):\n"
            "    line = f'--nsys --nproc 2 -n 3 -o ddp_report --setup \"{setup}\"'\n"
            "    get_ipython().run_cell_magic('gpuprofile', line, step)\n"
            "else:\n"
            "    print(f'skipped: --nproc 2 needs two GPUs and nsys ({ngpu} GPU(s) here)')",
        ),
        (
            "md",
            "**Per rank, as data.** The same figures as the report's table, one row per rank "
            "and GPU (times in ns).",
        ),
        (
            "code",
            "rank_figures(ddp_report.trace) if ddp_report is not None else print('skipped: "
            "no two-GPU capture above')",
        ),
        (
            "md",
            "**A capture from two H100s.** A DDP step with an all-reduce, all-gather, "
            "reduce-scatter and broadcast, "
            "profiled with `--nproc 2` and kept with the tests: the same views, on any machine.",
        ),
        (
            "code",
            "kept = pathlib.Path(gpumagic.__file__).parents[1] / 'tests' / 'data' / 'nsys' / "
            "'ddp2.sqlite.gz'\n"
            "if kept.exists():\n"
            "    path = pathlib.Path(tempfile.mkdtemp()) / 'ddp2.sqlite'\n"
            "    path.write_bytes(gzip.decompress(kept.read_bytes()))\n"
            "    saved = ProfileReport(gpumagic.load_nsys(path), label='DDP step on 2 x H100')\n"
            "    display(saved)\n"
            "    display(rank_figures(saved.trace))\n"
            "else:\n"
            "    print('the two-rank capture is not in this checkout "
            "(tests/data/nsys/ddp2.sqlite.gz)')",
        ),
    ],
    "09_whole_job": [
        (
            "md",
            "# 9. A whole job: one report per rank, read back as one\n\n"
            "A job that outgrows one host cannot run under one `nsys` (`--nproc` covers the "
            "GPUs of one host). It "
            "leaves one report per rank instead, and `gpumagic.load_nsys` / "
            "`gpumagic.load_trace` read a folder, a "
            "glob or a list of them as one job: the same per-rank views as a `--nproc` capture.\n\n"
            "**Capture, one report per rank.** With torchrun, the same line on every node: "
            "the c10d rendezvous "
            "gives each node its rank, and nsys expands `%q{RANK}` from the environment "
            "torchrun gives each rank "
            "(`node0:29500`: a host and free port every node reaches; `job42`: an id of your "
            "own):\n\n"
            "```\ntorchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-id job42 \\\n"
            "    --rdzv-endpoint node0:29500 --no-python \\\n"
            "    nsys profile -t cuda,nvtx -o /shared/job/rank%q{RANK} --export=sqlite "
            "python train.py\n```\n\n"
            "With torchrun's static rendezvous instead (`--master-addr node0 --master-port "
            "29500`), each node "
            "passes its own `--node-rank` (0, 1, …); that option is read only by the static "
            "rendezvous. "
            "Under SLURM, one task per GPU: `srun --nodes 2 --ntasks-per-node 8 "
            "--gpus-per-task 1 nsys profile "
            "-t cuda,nvtx -o /shared/job/rank%q{SLURM_PROCID} --export=sqlite python train.py`. "
            "To record only a few steps, open an NVTX range around them in `train.py` "
            "(`torch.cuda.nvtx.range_push('step')`) and add `--capture-range=nvtx "
            "--nvtx-capture=step "
            "--capture-range-end=stop` (with `NSYS_NVTX_PROFILER_REGISTER_ONLY=0` in the "
            "environment). With "
            "torch.profiler instead, each rank writes its own trace: "
            "`prof.export_chrome_trace(f'/shared/traces/rank{dist.get_rank()}.json')`.",
        ),
        (
            "code",
            SETUP + "\nimport gzip, pathlib, shutil, tempfile\nimport gpumagic\n"
            "from gpumagic.analysis.ranks import rank_figures\nfrom gpumagic.render.report "
            "import ProfileReport\n"
            "kept = pathlib.Path(gpumagic.__file__).parents[1] / 'tests' / 'data' / 'per_rank'\n"
            "job = pathlib.Path(tempfile.mkdtemp()) / 'job'\n"
            "job.mkdir()\n"
            "for rank in (0, 1):  # the two exports kept with the tests, unzipped as nsys "
            "wrote them\n"
            "    (job / f'rank{rank}.sqlite').write_bytes(gzip.decompress((kept / 'nsys' / "
            "f'rank{rank}.sqlite.gz')"
            ".read_bytes()))\n"
            "print(sorted(p.name for p in job.iterdir()))",
        ),
        (
            "md",
            "**Read back.** The two exports were captured the same way, each rank under its "
            "own nsys, on one host "
            "with 2×H100 (`torchrun --standalone --nproc-per-node 2 --no-python nsys profile …`, "
            "`tests/data/capture/per_rank.py`): rank 1 runs 20 fp32 GEMMs before "
            "an all-reduce that rank 0 enters at once. Ranks come from the first rule that "
            "gives every file its own "
            "(gpumagic's mark, the `RANK` each report records, the file name, the file "
            "order), and the report says "
            "which; files of different hosts are aligned on the first collective every rank "
            "ran. Look at the "
            "straggler, and at rank 0's all-reduce, whose time is waiting, not moving data.",
        ),
        (
            "code",
            "trace = gpumagic.load_nsys(job)  # a folder; also a glob ('job/rank*.sqlite') "
            "or a list of files\n"
            "ProfileReport(trace, label='straggler step, one export per rank')",
        ),
        (
            "code",
            "rank_figures(trace)[['label', 'span_ns', 'busy_ns', 'nccl_ns', 'work_ns', 'kernels']]",
        ),
        (
            "md",
            "**torch.profiler traces per rank** read the same way (the rank from each "
            "trace's `distributedInfo`). "
            "Many files read in parallel: `executor=` takes any `concurrent.futures.Executor` "
            "(`dask.distributed.Client(...).get_executor()` to read them on a cluster).",
        ),
        (
            "code",
            "traces = gpumagic.load_trace(kept / 'torch')\n"
            "print(traces.meta['rank_rule'], '|', traces.meta['clock_alignment']['method'])\n"
            "rank_figures(traces)[['label', 'busy_ns', 'nccl_ns', 'work_ns', 'kernels']]",
        ),
    ],
    "10_what_changed": [
        (
            "md",
            "# 10. What changed between two runs\n\n"
            "One training step (a small MLP: forward, loss, backward, SGD step) profiled "
            "four times: in fp32, with "
            "TF32 allowed, in bf16 autocast, and compiled. `-l NAME` saves each profile's "
            "summaries to the history "
            "(not its trace: a few KB); `--vs NAME` shows `gpumagic.diff` against the saved "
            "one after the report: "
            "kernels matched by what they are (a GEMM whose kernel changed is one changed "
            "row, said when matched "
            "loosely), the rows adding up to the change in GPU busy time, the largest "
            "changes in a sentence each, "
            "and a waterfall of where the time moved. `--vs last` takes the previous profile "
            "on this device. On the "
            "CPU the profiles have no kernels: the diffs show the windows alone.",
        ),
        ("code", SETUP),
        (
            "code",
            "torch.manual_seed(0)\n"
            "D, B = (2048, 8192) if device == 'cuda' else (64, 32)\n"
            "model = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(), "
            "torch.nn.Linear(4 * D, D))\n"
            "model = model.to(device)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=1e-3)\n"
            "x = torch.randn(B, D, device=device)\n\n\n"
            "def step(m, bf16=False):\n"
            "    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):\n"
            "        loss = m(x).float().pow(2).mean()\n"
            "    loss.backward()\n"
            "    opt.step()\n"
            "    opt.zero_grad(set_to_none=True)",
        ),
        ("md", "**fp32.** The reference: every GEMM on the FFMA path (CUDA cores)."),
        (
            "code",
            "%%gpuprofile -l fp32 --no-timeline\ntorch.backends.cuda.matmul.allow_tf32 = "
            "False\nstep(model)",
        ),
        (
            "md",
            "**TF32 allowed**, against fp32. Look at: the GEMMs' rows, each matched to its "
            "fp32 kernel although "
            "cuBLAS picked another one (tensor cores), and the sentence that says so.",
        ),
        (
            "code",
            "%%gpuprofile -l tf32 --vs fp32 "
            "--no-timeline\ntorch.backends.cuda.matmul.allow_tf32 = True\nstep(model)",
        ),
        (
            "md",
            "**bf16 autocast**, against TF32. New kernels appear (the casts to bf16 and "
            "back), the GEMMs run in "
            "bf16, and the element-wise work on half the bytes.",
        ),
        (
            "code",
            "%%gpuprofile -l bf16 --vs tf32 --no-timeline\n"
            "torch.backends.cuda.matmul.allow_tf32 = False\nstep(model, bf16=True)",
        ),
        (
            "md",
            "**Compiled**, against bf16: Inductor fuses the element-wise work into fewer "
            "kernels (GPU only here: "
            "compiling the step on the CPU takes long). The warm-up run (`-w 1`, the "
            "default) compiles, outside "
            "the capture.",
        ),
        (
            "code",
            "if device == 'cuda':\n"
            "    compiled = torch.compile(model)\n"
            "    get_ipython().run_cell_magic(\n"
            "        'gpuprofile', '-l compiled --vs bf16 --no-timeline', 'step(compiled, "
            "bf16=True)'\n"
            "    )\n"
            "else:\n"
            "    print('the compiled step is skipped on CPU')",
        ),
        (
            "md",
            "**From the history.** `gpumagic.history(kind='profile')` lists the saved "
            "profiles (GPU busy and wall "
            "time in seconds, kernel launches, the path of a trace kept); a later cell diffs "
            "against any of them "
            "by label or id (`%%gpuprofile --vs 12`).",
        ),
        (
            "code",
            "import gpumagic\n"
            "saved = gpumagic.history(kind='profile').tail(4)\n"
            "saved[['id', 'label', 'device', 'gpu_busy', 'wall', 'kernels']]",
        ),
    ],
    "11_compiled_and_graphs": [
        (
            "md",
            "# 11. Eager, compiled, and replayed as a CUDA graph\n\n"
            "One block (Linear, GELU, Linear, a residual and a LayerNorm) three ways: eager; "
            "`torch.compile`d "
            "(Inductor fuses the element-wise work into generated kernels); and "
            '`mode="reduce-overhead"` (the '
            "compiled kernels recorded once in a CUDA graph and replayed: one launch per "
            "call). gpumagic measures "
            "each without changing it: the work count runs compiled code with torch.compile "
            "standing aside, so "
            "the model stays compiled after every magic. On the CPU Inductor writes C++ "
            "kernels and there are no "
            "CUDA graphs: the reduce-overhead cells say they were skipped.",
        ),
        ("code", SETUP),
        (
            "code",
            "torch.manual_seed(0)\n"
            "D, B = (4096, 64) if device == 'cuda' else (256, 16)\n\n\n"
            "class Block(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.up, self.down = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)\n"
            "        self.norm = torch.nn.LayerNorm(D)\n\n"
            "    def forward(self, x):\n"
            "        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))\n\n\n"
            "dtype = torch.bfloat16 if device == 'cuda' else torch.float32\n"
            "block = Block().to(device, dtype).eval()\n"
            "x = torch.randn(B, D, device=device, dtype=dtype)\n"
            "compiled = torch.compile(block)\n"
            "graphed = torch.compile(block, mode='reduce-overhead') if device == 'cuda' else None\n"
            "with torch.no_grad():\n"
            "    for f in (compiled, graphed):\n"
            "        for _ in range(3):  # compile, then (reduce-overhead) record the graph\n"
            "            f is not None and f(x)",
        ),
        (
            "md",
            "**Look at:** the three side by side, interleaved. At this size the block is "
            "launch-bound eager: the "
            "compiled one launches fewer kernels, the graph one launch per call.",
        ),
        (
            "code",
            "lines = ['block(x)  # eager', 'compiled(x)  # compiled']\n"
            "if graphed is not None:\n"
            "    lines.append('graphed(x)  # reduce-overhead')\n"
            "with torch.no_grad():\n"
            "    get_ipython().run_cell_magic('gputime', '--compare', '\\n'.join(lines))",
        ),
        (
            "md",
            "**Look at:** the compiled block's kernels. The GEMMs stay library kernels "
            "(cuBLAS); the bias, GELU, "
            "residual and LayerNorm become Inductor's kernels, and each one's name cell says "
            "which ATen ops and "
            "graph nodes it fused (expand a row), read from the code Inductor wrote. On the "
            "CPU the C++ kernels run "
            "inside the compiled region and the table lists no GPU kernels.",
        ),
        ("code", "%%gpuprofile -w 2 --no-timeline -o rep\nwith torch.no_grad():\n    compiled(x)"),
        (
            "code",
            "for name, fused in rep.trace.meta.get('fused', {}).items():\n"
            "    print(f'{name}: {fused}')\n"
            "regions = (rep.trace.ops['name'].astype(str).str.startswith('Torch-Compiled "
            "Region')).sum()\n"
            "print('compiled regions in the capture:', regions)",
        ),
        (
            "md",
            "**Look at:** the CUDA graph replay. Its kernels are listed one by one, not as "
            "one launch row, each "
            "kept with the `cudaGraphLaunch` that ran it; the findings say the cell already "
            "replays a graph "
            "instead of advising one.",
        ),
        (
            "code",
            "if graphed is not None:\n"
            "    from gpumagic.analysis.launch_remedies import graph_kernels\n"
            "    get_ipython().run_cell_magic(\n"
            "        'gpuprofile', '-w 2 --no-timeline -o rep_graph', 'with "
            "torch.no_grad():\\n    graphed(x)'\n"
            "    )\n"
            "    replay = graph_kernels(rep_graph.trace)\n"
            "    print(f'{int(replay.notna().sum())} of {len(replay)} kernels ran inside a "
            "graph replay')\n"
            "else:\n"
            "    print('CUDA graphs: skipped on the CPU')",
        ),
        (
            "md",
            "**Look at:** measuring left the model as it was. A plain torch.profiler capture "
            "of the next call still "
            "shows the compiled region, and none of the eager ops Inductor fused away.",
        ),
        (
            "code",
            "from torch.profiler import ProfilerActivity, profile\n\n"
            "with profile(activities=[ProfilerActivity.CPU]) as prof, torch.no_grad():\n"
            "    compiled(x)\n"
            "names = {e.name for e in prof.events()}\n"
            "print('still compiled:', any(n.startswith('Torch-Compiled Region') for n in names))\n"
            "print('eager gelu ran:', 'aten::gelu' in names)",
        ),
    ],
}


def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


def executed(nb: nbformat.NotebookNode) -> bool:
    return any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


def main(force: bool = False) -> None:
    for name, cells in NOTEBOOKS.items():
        path = HERE / f"{name}.ipynb"
        nb = build(name, cells)
        if path.exists():
            old = nbformat.read(path, as_version=4)
            if executed(old) and not force:
                print("kept (committed executed; --force rewrites it)", path)
                continue
            for new_cell, old_cell in zip(nb.cells, old.cells):
                if "id" in old_cell:
                    new_cell["id"] = old_cell["id"]
        nbformat.write(nb, path)
        print("wrote", path)


if __name__ == "__main__":
    main(force="--force" in sys.argv[1:])
