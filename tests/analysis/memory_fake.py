"""Allocator snapshots written in torch's own format (torch/cuda/memory.py ``_snapshot``), for the
memory tests.

A :class:`FakeAllocator` keeps segments and blocks the way the caching allocator reports them and
records the history entries it would record: ``alloc``/``free_requested``/``free_completed`` with
the request's size, ``segment_alloc``/``segment_free`` with the segment's, ``oom`` with
``device_free``. Frames are shared dicts, one per distinct frame, as torch builds them.
"""

from __future__ import annotations

import pickle
from typing import Any

USER = "/home/me/train.py"
SITE = "/usr/lib/python3.11/site-packages/torch"

_frames: dict[tuple[str, int, str], dict[str, Any]] = {}


def frame(filename: str, line: int, name: str) -> dict[str, Any]:
    key = (filename, line, name)
    if key not in _frames:
        _frames[key] = {"filename": filename, "line": line, "name": name}
    return _frames[key]


def forward(line: int = 10, op: str = "nn/modules/linear.py") -> list[dict[str, Any]]:
    return [
        frame(f"{SITE}/{op}", 125, "forward"),
        frame(USER, line, "step"),
        frame(USER, 40, "<module>"),
    ]


def optim(line: int = 20) -> list[dict[str, Any]]:
    return [frame(f"{SITE}/optim/adamw.py", 300, "_multi_tensor_adamw"), frame(USER, line, "step")]


def params() -> list[dict[str, Any]]:
    return [frame(f"{SITE}/nn/modules/module.py", 1340, "_apply"), frame(USER, 5, "<module>")]


class FakeAllocator:
    """Segments of 2 MiB+ and blocks at increasing addresses; ``time_us`` advances 10 µs per
    entry."""

    def __init__(self, record: bool = True) -> None:
        self.trace: list[dict[str, Any]] = []
        self.segments: dict[int, dict[str, Any]] = {}
        self.blocks: dict[int, dict[str, Any]] = {}  # addr -> {size, requested, seg, frames}
        self.record = record
        self.t = 1_700_000_000_000_000
        self.next_addr = 1 << 32

    def _entry(
        self, action: str, addr: int, size: int, frames: list | None = None, **more: Any
    ) -> None:
        if not self.record:
            return
        self.t += 10
        e = {
            "action": action,
            "addr": addr,
            "size": size,
            "stream": 0,
            "time_us": self.t,
            "frames": frames or [],
        }
        e.update(more)
        self.trace.append(e)

    def segment(self, size: int) -> int:
        addr = self.next_addr
        self.next_addr += size + (1 << 20)
        self.segments[addr] = {"addr": addr, "size": size, "used": 0}
        self._entry("segment_alloc", addr, size)
        return addr

    def alloc(self, size: int, frames: list | None = None) -> int:
        block = max(512, -(-size // 512) * 512)
        for seg in self.segments.values():
            if seg["size"] - seg["used"] >= block:
                break
        else:
            seg = self.segments[self.segment(max(2 << 20, block))]
        addr = seg["addr"] + seg["used"]
        seg["used"] += block
        self.blocks[addr] = {
            "size": block,
            "requested": size,
            "seg": seg["addr"],
            "frames": frames or [],
        }
        self._entry("alloc", addr, size, frames)
        return addr

    def free(self, addr: int) -> None:
        b = self.blocks.pop(addr)
        self._entry("free_requested", addr, b["requested"])
        self._entry("free_completed", addr, b["requested"])
        seg = self.segments[b["seg"]]
        if not any(x["seg"] == b["seg"] for x in self.blocks.values()):
            seg["used"] = 0

    def empty_cache(self) -> None:
        for addr in [
            a
            for a, s in self.segments.items()
            if not any(x["seg"] == a for x in self.blocks.values())
        ]:
            self._entry("segment_free", addr, self.segments.pop(addr)["size"])

    def oom(self, size: int, device_free: int) -> None:
        self._entry("oom", 0, size, device_free=device_free)

    def allocated(self) -> int:
        return sum(b["size"] for b in self.blocks.values())

    def reserved(self) -> int:
        return sum(s["size"] for s in self.segments.values())

    def snapshot(self) -> dict[str, Any]:
        segs = []
        for addr, s in sorted(self.segments.items()):
            mine = sorted((a, b) for a, b in self.blocks.items() if b["seg"] == addr)
            blocks, used = [], 0
            for a, b in mine:
                blocks.append(
                    {
                        "address": a,
                        "size": b["size"],
                        "requested_size": b["requested"],
                        "state": "active_allocated",
                        "frames": b["frames"],
                    }
                )
                used += b["size"]
            if s["size"] > used:
                blocks.append(
                    {
                        "address": addr + used,
                        "size": s["size"] - used,
                        "requested_size": 0,
                        "state": "inactive",
                        "frames": [],
                    }
                )
            segs.append(
                {
                    "device": 0,
                    "address": addr,
                    "total_size": s["size"],
                    "allocated_size": used,
                    "active_size": used,
                    "requested_size": sum(b["requested"] for _, b in mine),
                    "stream": 0,
                    "segment_type": "large",
                    "segment_pool_id": (0, 0),
                    "is_expandable": False,
                    "blocks": blocks,
                }
            )
        return {"segments": segs, "device_traces": [self.trace]}

    def dump(self, path: str) -> str:
        with open(path, "wb") as f:
            pickle.dump(self.snapshot(), f)
        return path


def training_run(steps: int = 2) -> tuple[FakeAllocator, dict[str, int]]:
    """Parameters and optimizer state made before the recording; ``steps`` steps recorded: forward
    activations (one of them re-made each step), a temporary, gradients made in backward (no Python
    stack), an optimizer temporary. Returns the allocator and the expected figures."""
    a = FakeAllocator(record=False)
    w = a.alloc(4 << 20, params())
    state = a.alloc(8 << 20, optim())
    a.record = True
    grads: list[int] = []
    peak = a.allocated()
    for _ in range(steps):
        for g in grads:  # zero_grad(set_to_none=True)
            a.free(g)
        act = a.alloc(16 << 20, forward(10))
        tmp = a.alloc(1000, forward(11, "nn/functional.py"))
        a.free(tmp)
        out = a.alloc(2 << 20, forward(12))
        peak = max(peak, a.allocated())
        g_out = a.alloc(2 << 20, [])  # backward: the autograd engine's thread has no Python stack
        peak = max(peak, a.allocated())
        a.free(out)
        a.free(act)
        a.free(g_out)
        grads = [a.alloc(4 << 20, [])]
        peak = max(peak, a.allocated())
        ot = a.alloc(4 << 20, optim())
        peak = max(peak, a.allocated())
        a.free(ot)
    return a, {"peak": peak, "before": 12 << 20, "w": w, "state": state}
