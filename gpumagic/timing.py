"""Device-correct timing of a statement: the engine behind ``%gputime``. No IPython import.

The measurement, in order (the reasons are in ``shared`` research on NVBench, do_bench, torch's Timer and %timeit):

1. **First call**, synchronized and wall-clocked: lazy CUDA init, cuBLAS heuristics and JIT land here (189 ms cold
   vs 3.7 ms warm for a 4096² fp32 matmul on a GB10). Kept and reported when it is far above the steady state.
2. **Warm-up** in doubling batches until a few calls and a few tens of ms of device time have run. The last batch
   calibrates the time per call.
3. **Calls per sample** ``k`` so that a sample lasts about 1 ms: the CUDA event quantum (~0.5 µs) is then 0.05 %.
4. **Samples** on the current stream with shared boundary events (no gap between samples), enqueued in rounds and
   double-buffered: the host enqueues round r+1 before it waits for round r, so the GPU never waits on the host
   unless the host really is slower (launch-bound, which is then what the samples say). A short ``_sleep``
   backlog is queued first so the first start event does not wait on the host either. No flush, no sync, no
   Python work between calls: the same back-to-back, hot-cache regime as the CUPTI kernel-busy truth.
5. **Stop** when :class:`~gpumagic.stats.StopRule` says the median is stable, or the time budget ends.
6. **Kernel pass**: a few ms of calls under torch.profiler (CUPTI, CUDA activity only); the union of kernel
   intervals per call is ``kernel_time``, and ``kernel_time / median`` is the GPU busy share.
7. **Host pass**: the time to *issue* a call, with few enough launches that the launch queue never blocks.
   GPU mostly idle and host time close to the per-call time means launch-bound, and the line says so.

Without CUDA (or with the statement's tensors on the CPU, or ``cpu=True``) the same steps run on the host clock.
"""

from __future__ import annotations

import gc
import math
import sys
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .intervals import union_length
from .result import TimingResult
from .statement import CompiledStatement, compile_statement
from .stats import StopRule

__all__ = ["CudaSampler", "HostSampler", "Sampler", "TimingOptions", "TimingResult", "gputime", "measure"]


@dataclass(frozen=True)
class TimingOptions:
    """Every knob of a measurement. ``None`` means "choose adaptively"."""

    calls_per_sample: int | None = None  # -n
    samples: int | None = None  # -r
    warmup_calls: int | None = None  # -w
    warmup_time: float = 0.03
    min_warmup_calls: int = 3
    warmup_wall_cap: float = 0.3
    target_sample_time: float = 1e-3
    max_calls_per_sample: int = 10_000
    time_budget: float = 0.5
    min_samples_on_budget: int = 3
    round_time: float = 0.01
    stop_rule: StopRule = field(default_factory=StopRule)
    flush_l2: bool = False
    graph: bool = False
    cpu: bool = False
    kernel_time: bool = True
    kernel_pass_time: float = 0.01
    kernel_preload_time: float = 0.05
    max_kernel_pass_calls: int = 2000
    host_pass_time: float = 0.002
    first_call_ratio: float = 2.0
    first_call_min: float = 1e-3
    precision: int = 3

    def validate(self) -> None:
        for name in ("calls_per_sample", "samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if self.warmup_calls is not None and self.warmup_calls < 0:
            raise ValueError(f"warmup_calls must be 0 or more, got {self.warmup_calls}")
        if self.time_budget <= 0:
            raise ValueError(f"time_budget must be positive, got {self.time_budget}")
        if self.flush_l2 and self.calls_per_sample not in (None, 1):
            raise ValueError(
                "--flush-l2 times each call alone (the flush must sit between calls, outside the timed window): "
                "drop -n, or drop --flush-l2 for back-to-back calls"
            )
        if self.flush_l2 and self.graph:
            raise ValueError("--flush-l2 and --graph cannot be combined yet: choose one")


# ---------------------------------------------------------------------------------------------------------------
# Samplers: one per clock. The orchestrator below only talks to this interface, so its logic is tested with a
# scripted sampler and no clock at all.
# ---------------------------------------------------------------------------------------------------------------


class Sampler:
    """A clock that measures batches of calls. Durations are seconds for the whole batch."""

    device: str = "CPU"
    backend: str = "host"
    #: seconds the profiler's first start took in this process, when this sampler paid for it
    profiler_startup: float | None = None

    def kernel_pass_notes(self) -> list[str]:
        """Sentences about the kernel pass (why a kernel time is missing) for the result."""
        return []

    @property
    def on_device(self) -> bool:
        """Whether this clock times a GPU (so a kernel-time pass and a host-issue pass make sense)."""
        return self.backend != "host"

    def first_call(self, once: Callable[[], Any]) -> tuple[float, Any]:
        raise NotImplementedError

    def batch(self, inner: Callable[[int], None], n: int) -> tuple[float, float]:
        """Run n calls synchronously; return (measured seconds, host seconds spent issuing them)."""
        raise NotImplementedError

    def prepare(self, inner: Callable[[int], None], k: int) -> list[str]:
        """Called once before sampling with the chosen k; returns notes (e.g. a graph-capture fallback)."""
        return []

    def start(self, backlog: float) -> None:
        """Begin sampling; ``backlog`` is how much device work to queue ahead of the first sample."""

    def enqueue(self, inner: Callable[[int], None], k: int, m: int) -> Any:
        raise NotImplementedError

    def collect(self, handle: Any) -> list[float]:
        raise NotImplementedError

    def salvage(self, handle: Any) -> list[float]:
        """After an interrupt and :meth:`finish`: the durations of a round that completed, in part or whole."""
        try:
            return self.collect(handle)
        except Exception:  # noqa: BLE001 - salvage is best effort
            return []

    def kernel_pass(self, inner: Callable[[int], None], calls: int, preload: int = 0) -> tuple[float, float] | None:
        """(busy seconds per call, kernels per call) from a profiler, or None where there is none."""
        return None

    def host_pass(self, inner: Callable[[int], None], calls: int) -> float:
        t0 = time.perf_counter()
        inner(calls)
        return (time.perf_counter() - t0) / calls

    def sm_clock(self) -> int | None:
        """Current SM clock in MHz where the device reports it (NVML), else None."""
        return None

    def finish(self) -> None:
        """Wait for everything issued (errors from asynchronous work surface here)."""

    def meta(self) -> dict[str, Any]:
        return {}


class HostSampler(Sampler):
    """``time.perf_counter`` around each sample: CPU code, or no CUDA."""

    def __init__(self, reason: str = "") -> None:
        self.device = "CPU"
        self.backend = "host"
        self.reason = reason

    def first_call(self, once: Callable[[], Any]) -> tuple[float, Any]:
        t0 = time.perf_counter()
        value = once()
        return time.perf_counter() - t0, value

    def batch(self, inner: Callable[[int], None], n: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        inner(n)
        dt = time.perf_counter() - t0
        return dt, dt

    def enqueue(self, inner: Callable[[int], None], k: int, m: int) -> dict[str, Any]:
        # The host clock has no queue to fill: the round runs when it is collected, sample by sample, so an
        # interrupt keeps the samples already taken.
        return {"inner": inner, "k": k, "m": m, "done": []}

    def collect(self, handle: dict[str, Any]) -> list[float]:
        inner, k, done = handle["inner"], handle["k"], handle["done"]
        clock = time.perf_counter
        for _ in range(handle["m"] - len(done)):
            t0 = clock()
            inner(k)
            done.append(clock() - t0)
        return done

    def salvage(self, handle: dict[str, Any]) -> list[float]:
        return handle["done"]


def _torch() -> Any | None:
    try:
        import torch
    except ImportError:
        return None
    return torch


_SLEEP_CYCLES_PER_SECOND: dict[int, float] = {}
_PROFILER_WARM = False


class CudaSampler(Sampler):
    """CUDA events on the current stream of ``device``; optional L2 flush or CUDA-graph replay."""

    def __init__(self, device: Any, flush_l2: bool = False, graph: bool = False) -> None:
        import torch

        self.torch = torch
        self.dev = torch.device(device)
        if self.dev.index is None:
            self.dev = torch.device("cuda", torch.cuda.current_device())
        props = torch.cuda.get_device_properties(self.dev)
        self.device = props.name
        self.props = props
        self.stream = torch.cuda.current_stream(self.dev)
        self.flush_l2 = flush_l2
        self.use_graph = graph
        self.graph: Any = None
        self.backend = "cuda-events"
        self._flush_buffer: Any = None
        self._boundary: Any = None
        self.profiler_startup: float | None = None
        self._kernel_pass_notes: list[str] = []

    # helpers ---------------------------------------------------------------------------------------------------
    def _event(self) -> Any:
        e = self.torch.cuda.Event(enable_timing=True)
        e.record(self.stream)
        return e

    def _sync(self) -> None:
        self.torch.cuda.synchronize(self.dev)

    def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        rate = self._sleep_rate()
        if rate:
            with self.torch.cuda.stream(self.stream):
                self.torch.cuda._sleep(int(seconds * rate))

    def _sleep_rate(self) -> float | None:
        """Cycles per second of ``torch.cuda._sleep`` on this device, measured once per process."""
        idx = self.dev.index
        if idx not in _SLEEP_CYCLES_PER_SECOND:
            try:
                with self.torch.cuda.device(self.dev), self.torch.cuda.stream(self.stream):
                    self.torch.cuda._sleep(1000)
                    start = self._event()
                    self.torch.cuda._sleep(5_000_000)
                    end = self._event()
                end.synchronize()
                _SLEEP_CYCLES_PER_SECOND[idx] = 5_000_000 / (start.elapsed_time(end) * 1e-3)
            except (RuntimeError, AttributeError, ZeroDivisionError):
                _SLEEP_CYCLES_PER_SECOND[idx] = 0.0
        return _SLEEP_CYCLES_PER_SECOND[idx] or None

    # interface -------------------------------------------------------------------------------------------------
    def first_call(self, once: Callable[[], Any]) -> tuple[float, Any]:
        self._sync()
        t0 = time.perf_counter()
        value = once()
        self._sync()
        return time.perf_counter() - t0, value

    def batch(self, inner: Callable[[int], None], n: int) -> tuple[float, float]:
        start = self._event()
        t0 = time.perf_counter()
        inner(n)
        host = time.perf_counter() - t0
        end = self._event()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3, host

    def prepare(self, inner: Callable[[int], None], k: int) -> list[str]:
        notes: list[str] = []
        if self.flush_l2:
            # Twice the L2 size: a memset of exactly L2 bytes can leave lines of the working set resident.
            size = 2 * int(getattr(self.props, "L2_cache_size", 0) or 64 * 2**20)
            self._flush_buffer = self.torch.empty(size, dtype=self.torch.uint8, device=self.dev)
        if self.use_graph:
            blocker = self._sync_inside(inner, k)
            if blocker:
                notes.append(
                    f"--graph: the statement synchronizes with the host ({blocker}), which a CUDA graph cannot "
                    "capture; timed without a graph."
                )
                return notes
            graph = self.torch.cuda.CUDAGraph()
            try:
                self._sync()
                with self.torch.cuda.graph(graph):
                    inner(k)
                graph.replay()
                self._sync()
            except Exception as exc:  # noqa: BLE001 - any capture failure means: time without a graph
                try:
                    self._sync()
                except Exception:  # noqa: BLE001
                    pass
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                notes.append(
                    f"--graph: the statement cannot be captured in a CUDA graph ({first}); timed without a graph."
                )
            else:
                self.graph = graph
                self.backend = "cuda-graph"
        return notes

    def _sync_inside(self, inner: Callable[[int], None], k: int) -> str | None:
        """Run the calls once with synchronizing operations turned into errors; the error text, if any.

        A capture that fails half-way leaves PyTorch's RNG and allocator in capture state ("Offset increment
        outside graph capture"), so statements that would fail are screened out before capturing.
        """
        torch = self.torch
        previous = torch.cuda.get_sync_debug_mode()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Synchronization debug mode is a prototype feature"
            torch.cuda.set_sync_debug_mode("error")
        try:
            inner(k)
        except RuntimeError as exc:
            return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        finally:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.cuda.set_sync_debug_mode(previous)
        self._sync()
        return None

    def start(self, backlog: float) -> None:
        self._sync()
        self._sleep(backlog)
        self._boundary = self._event()

    def enqueue(self, inner: Callable[[int], None], k: int, m: int) -> list[tuple[Any, Any]]:
        pairs = []
        for _ in range(m):
            if self.flush_l2:
                self._flush_buffer.zero_()
                start = self._event()
            else:
                start = self._boundary
            if self.graph is not None:
                self.graph.replay()
            else:
                inner(k)
            end = self._event()
            pairs.append((start, end))
            self._boundary = end
        return pairs

    def collect(self, handle: list[tuple[Any, Any]]) -> list[float]:
        handle[-1][1].synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in handle]

    def _warm_profiler(self) -> None:
        # CUPTI drops kernels at the start of a process's first capture (pytorch #192021): a throwaway capture.
        global _PROFILER_WARM
        if _PROFILER_WARM:
            return
        t0 = time.perf_counter()
        busy_per_call(lambda n: self.torch.ones(1, device=self.dev).add_(1), 1, self.dev.index)
        self.profiler_startup = time.perf_counter() - t0
        _PROFILER_WARM = True

    def kernel_pass(self, inner: Callable[[int], None], calls: int, preload: int = 0) -> tuple[float, float] | None:
        self._warm_profiler()
        if self.graph is not None:
            graph = self.graph

            def run(n: int) -> None:
                for _ in range(n):
                    graph.replay()

            # one unit is one replay of calls_per_sample calls: the caller divides
            return busy_per_call(run, calls, self.dev.index, preload=preload)
        if self.flush_l2:
            # The kernel time must be the cold-cache one the samples measure: flush before each call here too, and
            # leave the flush's own activity out by name.
            buf = self._flush_buffer
            flush_names = gpu_activity_names(buf.zero_)

            def run_cold(n: int) -> None:
                for _ in range(n):
                    buf.zero_()
                    inner(1)

            found = busy_per_call(run_cold, calls, self.dev.index, exclude=flush_names)
            if found is None:
                self._kernel_pass_notes.append(
                    "GPU kernel time not reported with --flush-l2: the statement's kernels share a name with the flush."
                )
            return found
        return busy_per_call(inner, calls, self.dev.index, preload=preload)

    def kernel_pass_notes(self) -> list[str]:
        return list(self._kernel_pass_notes)

    def host_pass(self, inner: Callable[[int], None], calls: int) -> float:
        self._sync()
        t0 = time.perf_counter()
        inner(calls)
        host = time.perf_counter() - t0
        self._sync()
        return host / calls

    def finish(self) -> None:
        self._sync()

    def sm_clock(self) -> int | None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return int(self.torch.cuda.clock_rate(self.dev))
        except Exception:  # noqa: BLE001 - no NVML (pynvml), or the device does not report clocks
            return None

    def meta(self) -> dict[str, Any]:
        torch = self.torch
        return {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device_index": self.dev.index,
            "sm_count": self.props.multi_processor_count,
        }


def gpu_intervals(
    prof: Any, device_index: int | None = None, launched_only: bool = True, exclude: frozenset[str] = frozenset()
) -> list[tuple[int, int]]:
    """(start_ns, end_ns) of the GPU activities (kernels, memcpy, memset) in a finished torch.profiler capture.

    With ``launched_only``, only activities whose correlation id matches a CUDA API call recorded in the same
    capture are kept: work launched before the capture started (a preload that keeps the GPU busy while the
    profiler starts) is left out by identity, never by time window. Activities named in ``exclude`` (an L2 flush's
    own kernels) are left out too.
    """
    gpu, launched = [], set()
    for ev in prof.profiler.kineto_results.events():
        if str(ev.device_type()).endswith("CUDA"):
            if device_index is None or ev.device_index() == device_index:
                gpu.append(ev)
        elif ev.correlation_id():
            launched.add(ev.correlation_id())
    keep = (lambda ev: ev.correlation_id() in launched) if launched_only and launched else (lambda ev: True)
    return [(ev.start_ns(), ev.start_ns() + ev.duration_ns()) for ev in gpu if keep(ev) and ev.name() not in exclude]


def busy_per_call(
    run: Callable[[int], None],
    calls: int,
    device_index: int | None = None,
    preload: int = 0,
    exclude: frozenset[str] = frozenset(),
) -> tuple[float, float] | None:
    """GPU busy seconds per call and GPU activities per call of ``run(calls)``, measured with CUPTI.

    ``preload`` calls are issued first, outside the capture, so that the GPU is busy (and at its sustained clocks)
    while the profiler starts: a GPU left idle for the profiler's start-up speeds up, and the figure would describe
    a GPU the statement never runs on. Returns None when no GPU activity was recorded.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    if preload:
        run(preload)
    else:
        torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run(calls)
            torch.cuda.synchronize()
    intervals = gpu_intervals(prof, device_index, exclude=exclude)
    if not intervals:
        return None
    return union_length(intervals) * 1e-9 / calls, len(intervals) / calls


def gpu_activity_names(run: Callable[[], None]) -> frozenset[str]:
    """Names of the GPU activities ``run()`` launches (profiled once)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
    return frozenset(
        ev.name() for ev in prof.profiler.kineto_results.events() if str(ev.device_type()).endswith("CUDA")
    )


# ---------------------------------------------------------------------------------------------------------------
# Choosing the clock
# ---------------------------------------------------------------------------------------------------------------


def tensor_devices(values: Iterable[Any], depth: int = 2) -> set[str]:
    """Device types ('cuda', 'cpu', ...) of the tensors and modules among ``values`` (and one level inside
    lists, tuples and dicts). Used to decide whether a statement runs on the GPU."""
    torch = _torch()
    if torch is None:
        return set()
    found: set[str] = set()

    def visit(v: Any, d: int) -> None:
        if isinstance(v, torch.Tensor):
            found.add(v.device.type)
        elif isinstance(v, torch.nn.Module):
            for p in v.parameters():
                found.add(p.device.type)
                break
            else:
                for b in v.buffers():
                    found.add(b.device.type)
                    break
        elif d > 0 and isinstance(v, (list, tuple)):
            for item in v[:16]:
                visit(item, d - 1)
        elif d > 0 and isinstance(v, dict):
            for item in list(v.values())[:16]:
                visit(item, d - 1)

    for value in values:
        visit(value, depth)
    return found


def _cuda_device_of(values: Iterable[Any]) -> Any:
    torch = _torch()
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_cuda:
            return v.device
        if isinstance(v, torch.nn.Module):
            for p in v.parameters():
                if p.is_cuda:
                    return p.device
    return torch.device("cuda", torch.cuda.current_device())


def choose_sampler(options: TimingOptions, namespace_values: list[Any]) -> tuple[Sampler, list[str]]:
    """The clock for this statement, and notes that explain a host-clock choice."""
    torch = _torch()
    if options.cpu:
        return HostSampler("--cpu"), []
    if torch is None:
        return HostSampler("PyTorch is not installed"), ["PyTorch is not installed: timed on the host clock."]
    if not torch.cuda.is_available():
        return HostSampler("CUDA is not available"), []
    devices = tensor_devices(namespace_values)
    if devices and "cuda" not in devices:
        return HostSampler("the statement's tensors are on the CPU"), [
            "The statement's tensors are on the CPU: timed on the host clock (move them with .cuda() to time the GPU)."
        ]
    return CudaSampler(_cuda_device_of(namespace_values), options.flush_l2, options.graph), []


# ---------------------------------------------------------------------------------------------------------------
# The orchestrator
# ---------------------------------------------------------------------------------------------------------------


def _warmup(
    sampler: Sampler, inner: Callable[[int], None], opts: TimingOptions, first_call: float
) -> tuple[float, float]:
    """Warm up; return (seconds per call, host seconds per call) estimated from the last batch."""
    if opts.warmup_calls == 0:
        return first_call, first_call
    per_call, host_per_call = first_call, first_call
    done, measured, n = 0, 0.0, 1
    wall0 = time.perf_counter()
    while True:
        if opts.warmup_calls is not None:
            n = min(n, opts.warmup_calls - done)
        dt, host = sampler.batch(inner, n)
        done += n
        measured += dt
        per_call, host_per_call = dt / n, host / n
        if opts.warmup_calls is not None:
            if done >= opts.warmup_calls:
                break
        elif (
            done >= opts.min_warmup_calls and measured >= opts.warmup_time
        ) or time.perf_counter() - wall0 > opts.warmup_wall_cap:
            break
        # Double, but do not overshoot the warm-up time by more than the current batch.
        remaining = max(opts.warmup_time - measured, 0.0)
        n = max(1, min(n * 2, math.ceil(remaining / per_call) if per_call > 0 else n * 2))
    return per_call, host_per_call


def measure(
    statement: CompiledStatement,
    namespace: Mapping[str, Any] | None = None,
    options: TimingOptions | None = None,
    *,
    sampler: Sampler | None = None,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> TimingResult:
    """Time a compiled statement. ``sampler`` overrides the clock choice (tests pass a scripted one)."""
    opts = options or TimingOptions()
    opts.validate()
    wall0 = wall_clock()
    namespace = namespace or {}
    notes: list[str] = []
    values = [namespace[n] for n in statement.read_names if n in namespace]
    if sampler is None:
        sampler, notes = choose_sampler(opts, values)

    first_call, value = sampler.first_call(statement.once)
    if isinstance(sampler, CudaSampler) and not opts.cpu:
        devices = tensor_devices([value])
        if devices and "cuda" not in devices and not tensor_devices(values):
            # Nothing in the namespace said where it runs, and it returned CPU tensors: a CPU statement.
            sampler = HostSampler("the statement returns CPU tensors")
            notes.append("The statement returns CPU tensors: timed on the host clock.")
    if isinstance(sampler, HostSampler):
        if opts.graph:
            notes.append(f"--graph needs CUDA ({sampler.reason}): timed on the host clock without a graph.")
        if opts.flush_l2:
            notes.append(f"--flush-l2 needs CUDA ({sampler.reason}): ignored.")
        opts = replace(opts, graph=False, flush_l2=False)

    per_call, host_est = _warmup(sampler, statement.inner, opts, first_call)

    if opts.flush_l2:
        k = 1
    elif opts.calls_per_sample is not None:
        k = opts.calls_per_sample
    else:
        k = int(min(opts.max_calls_per_sample, max(1, math.ceil(opts.target_sample_time / max(per_call, 1e-9) - 1e-6))))
    notes.extend(sampler.prepare(statement.inner, k))

    samples: list[float] = []
    measured = 0.0
    interrupted = False
    stop_reason = ""
    rule = opts.stop_rule
    per_round = max(1, min(64, math.ceil(opts.round_time / max(k * per_call, 1e-9))))
    if opts.samples is not None:
        per_round = min(per_round, opts.samples)
    current: Any = None
    unsettled = ""
    pending = deque()
    clock_start, clock_end = sampler.sm_clock(), None
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        # Queue ahead of the first start event about the time the host needs to issue two rounds.
        sampler.start(backlog=min(0.02, 2 * per_round * k * host_est))
        sample_wall0 = wall_clock()
        pending.append(sampler.enqueue(statement.inner, k, per_round))
        issued = per_round
        stopping = False
        while pending:
            if not stopping and len(pending) < 2 and (opts.samples is None or issued < opts.samples):
                m = per_round if opts.samples is None else min(per_round, opts.samples - issued)
                pending.append(sampler.enqueue(statement.inner, k, m))
                issued += m
            current = pending.popleft()
            durations = sampler.collect(current)
            current = None
            samples.extend(d / k for d in durations)
            measured += sum(durations)
            if stopping:
                continue
            if opts.samples is not None:
                stop_reason = f"{opts.samples} samples requested"
                stopping = issued >= opts.samples
                continue
            decision = rule.decide(samples, measured)
            stop_reason = decision.reason
            if decision.stop:
                stopping = True
            elif wall_clock() - sample_wall0 > opts.time_budget and len(samples) >= opts.min_samples_on_budget:
                stop_reason = f"time budget of {opts.time_budget:g} s ended ({decision.reason})"
                unsettled = decision.reason
                stopping = True
        sampler.finish()
        clock_end = sampler.sm_clock()
    except KeyboardInterrupt:
        interrupted = True
        stop_reason = "interrupted"
        try:
            sampler.finish()
        except Exception:  # noqa: BLE001 - the interrupt is what the user needs to see
            pass
        for handle in ([current] if current is not None else []) + list(pending):
            samples.extend(d / k for d in sampler.salvage(handle))
        if not samples:
            raise
    finally:
        if gc_was_enabled:
            gc.enable()

    kernel_time = kernels_per_call = host_per_call = None
    if not interrupted and opts.kernel_time and sampler.on_device:
        graph = sampler.backend == "cuda-graph"
        unit = k if graph else 1  # a graph replay runs k calls
        units = max(1, math.ceil(opts.kernel_pass_time / max(unit * per_call, 1e-9)))
        units = int(min(units, max(1, opts.max_kernel_pass_calls // unit)))
        # Keep a GPU-bound statement's GPU busy while the profiler starts (sustained clocks); a launch-bound
        # one idles anyway, so it gets no preload.
        preload = 0
        if host_est < per_call:
            preload = int(min(math.ceil(opts.kernel_preload_time / (unit * per_call)), opts.max_kernel_pass_calls))
        try:
            found = sampler.kernel_pass(statement.inner, units, preload)
        except RuntimeError as exc:  # another CUPTI subscriber (nsys, ncu) or a profiler already running
            notes.append(f"GPU kernel time unavailable: {str(exc).splitlines()[0] if str(exc) else exc!r}")
            found = None
        startup = sampler.profiler_startup
        if startup is not None and startup > 1.0:
            notes.append(
                f"The profiler's first start in this process took {startup:.1f} s (CUPTI start-up, "
                "once per process); `%config GpuMagics.kernel_time = False` skips the kernel-time pass."
            )
        pass_notes = sampler.kernel_pass_notes()
        notes.extend(pass_notes)
        if found is not None:
            kernel_time, kernels_per_call = found[0] / unit, found[1] / unit
        elif not pass_notes:
            notes.append("The profiler saw no GPU activity from this statement: is it running on the GPU?")
        if not graph:
            issue_calls = math.ceil(opts.host_pass_time / max(host_est, 1e-9))
            launch_cap = 256 // max(1, math.ceil(kernels_per_call or 1))  # never fill the launch queue
            host_calls = int(max(1, min(launch_cap, issue_calls)))
            host_per_call = min(sampler.host_pass(statement.inner, host_calls) for _ in range(3))

    if unsettled and ("halves differ" in unsettled or "CI" in unsettled):
        notes.append(
            f"The median had not settled when the {opts.time_budget:g} s budget ended ({unsettled}): clocks may still "
            "be changing under sustained load. A longer run: %config GpuMagics.time_budget = 2"
        )
    meta = {"compile_time": statement.compile_time, **sampler.meta()}
    if not interrupted and clock_start and clock_end:
        meta["sm_clock_mhz"] = (clock_start, clock_end)
        if abs(clock_end - clock_start) / clock_start > 0.03:
            notes.append(
                f"The SM clock moved from {clock_start} to {clock_end} MHz while sampling (power or thermal "
                "limits): the samples span both."
            )
    return TimingResult(
        samples=samples,
        calls_per_sample=k,
        device=sampler.device,
        backend=sampler.backend,
        first_call=first_call,
        kernel_time=kernel_time,
        kernels_per_call=kernels_per_call,
        host_per_call=host_per_call,
        flush_l2=opts.flush_l2 and sampler.backend != "host",
        stop_reason=stop_reason,
        interrupted=interrupted,
        notes=notes,
        wall_time=wall_clock() - wall0,
        precision=opts.precision,
        first_call_ratio=opts.first_call_ratio,
        first_call_min=opts.first_call_min,
        meta=meta,
    )


def gputime(
    stmt: str | Callable[[], Any],
    setup: str | Callable[[], Any] | None = None,
    globals: Mapping[str, Any] | None = None,
    *,
    options: TimingOptions | None = None,
    ast_transform: Callable[[Any], Any] | None = None,
    **overrides: Any,
) -> TimingResult:
    """Time ``stmt`` on the GPU (or the host, where there is no CUDA) and return a :class:`TimingResult`.

    ``stmt`` and ``setup`` are source text evaluated in ``globals`` (default: the caller's module globals) or
    zero-argument callables; the statement's own assignments stay local, so the namespace is left untouched.
    Keyword ``overrides`` are :class:`TimingOptions` fields, e.g. ``gputime("A @ B", globals=g, graph=True)``.

    >>> r = gputime("sum(range(100))")      # doctest: +SKIP
    >>> print(r)                             # doctest: +SKIP
    1.02 µs ± 3.1 ns per call on CPU (median ± IQR of 120 samples × 1000 calls)
    """
    opts = replace(options or TimingOptions(), **overrides)
    opts.validate()
    # Like a statement typed at that point: the caller's module globals, unless a namespace is given.
    namespace = globals if globals is not None else sys._getframe(1).f_globals
    compiled = compile_statement(stmt, setup, namespace, ast_transform=ast_transform)
    return measure(compiled, namespace, opts)
