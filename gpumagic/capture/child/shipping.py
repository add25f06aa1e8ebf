"""How a cell's names travel to a tool's subprocess (``--nsys``, ``--ncu``, ``--nproc``).

The names a cell reads (``cell_inputs.free_names``) are taken from the notebook's namespace and
written to a private directory in **one** serialization, so that identity holds across names as it
does in the notebook: an optimizer's parameters are the model's own, tied weights stay tied, a
scheduler's optimizer is the optimizer, two names of one dict are one dict. A training step run in
the subprocess then steps the model it runs (with one pickle per kind of value, as before, the
optimizer held copies and ``opt.step()`` updated nothing the cell used).

* The pickler is cloudpickle's: classes, functions, lambdas and dataclasses defined in the notebook
  (``__main__``) travel by value, and a function brings the globals it reads (in the same
  serialization: a helper's ``model`` is the cell's ``model``). Imported modules travel by name and
  are imported again in the subprocess.
* Tensor storages go beside the pickle, not inside it (``persistent_id``), each once, whatever
  number of tensors view it: a CPU storage as its bytes in one file; a CUDA storage by a CUDA IPC
  handle that the subprocess opens and copies device to device (:data:`IPC` ways; no trip through
  the host), or through the host where IPC is not possible (another device for a rank, a storage
  the allocator cannot share): :class:`Manifest` says which way each byte went. The subprocess works
  on its own copies: nothing it does changes the notebook's objects.
* What cannot travel (a generator, an open file, a socket, a CUDA stream or event, a ``DataLoader``
  with worker processes, a model wrapped in DDP or FSDP, anything else the pickler refuses) is
  found before anything is written, every such name at once, each with what to do instead
  (:class:`~gpumagic.errors.ShippingError`). So is a second copy of the CUDA tensors that does not
  fit in the device's free memory.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import socket
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...edges import TorchValue, UserValue
from ...errors import ShippingError
from ..marks.cell_inputs import free_names

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["Manifest", "ShippingError", "free_names", "onto", "restore", "ship"]

#: Names IPython puts in every namespace: never the cell's inputs.
_IPYTHON_NAMES = frozenset(("_", "__", "___", "In", "Out", "get_ipython", "exit", "quit"))
#: The files of a shipment in its directory.
MANIFEST, VALUES, STORAGES, BLOB = "manifest.pkl", "values.pkl", "storages.pkl", "storages.bin"
#: The ways a storage travels: its bytes in the blob file, or a CUDA IPC handle.
HOST, IPC = "host", "ipc"
#: Device memory kept free beside the subprocess' copy (its CUDA context, the cell's own work).
DEVICE_MARGIN = 1 << 30


class _Refused(Exception):
    """Raised inside the pickler when it meets a value that must not travel; ``why`` says what to
    do instead."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _refusal(obj: UserValue) -> str | None:
    """Why ``obj`` must not travel, with what to do instead; None where it may. These are values
    that pickle badly or not at all, and whose pickling error would not say what to do."""
    fix = 'make it in the cell, or with --setup "..." (it runs in the subprocess first)'
    if isinstance(obj, (types.GeneratorType, types.AsyncGeneratorType, types.CoroutineType)):
        return f"a generator (where it stands cannot be sent): {fix}"
    if isinstance(obj, io.IOBase):
        name = getattr(obj, "name", None)
        return f"an open file{f' ({name})' if isinstance(name, str) else ''}: {fix}"
    if isinstance(obj, socket.socket):
        return f"a socket (a connection belongs to one process): {fix}"
    cls = type(obj)
    qual = f"{cls.__module__}.{cls.__qualname__}"
    if qual in ("torch.cuda.streams.Stream", "torch.cuda.Stream", "torch.Stream"):
        return f"a CUDA stream (it belongs to one process): {fix}"
    if qual in ("torch.cuda.streams.Event", "torch.cuda.Event", "torch.Event"):
        return f"a CUDA event (it belongs to one process): {fix}"
    if qual == "torch.utils.data.dataloader.DataLoader" and getattr(obj, "num_workers", False):
        return (
            f"a DataLoader with {obj.num_workers} worker processes: pass a batch instead, give it "
            "num_workers=0 for the profile, or build the loader with --setup"
        )
    if qual.startswith("torch.utils.data.dataloader._") and qual.endswith("DataLoaderIter"):
        return "a DataLoader's iterator (its position and workers cannot be sent): " + fix
    if qual in (
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    ):
        return (
            f"a model wrapped in {cls.__name__} (its process group is this process'): send the "
            "bare module (model.module) and wrap it in the cell, with --nproc N for ranks"
        )
    return None


def _torch() -> types.ModuleType | None:
    try:
        import torch
    except ImportError:  # pragma: no cover - the tools' paths need torch anyway
        return None
    return torch


def _untyped(
    obj: UserValue, torch: types.ModuleType | None
) -> tuple[TorchValue, TorchValue | None] | None:
    """(the untyped storage, the typed storage's dtype or None) where ``obj`` is a storage."""
    if torch is None:
        return None
    if isinstance(obj, torch.storage.TypedStorage):
        return obj._untyped_storage, obj.dtype
    if isinstance(obj, torch.UntypedStorage):
        return obj, None
    return None


def _pickler_class() -> type:
    import cloudpickle

    class Writer(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle ships no types
        """cloudpickle's pickler that refuses what must not travel and keeps storages out of
        the stream (``found`` maps each storage's key to it, each storage once)."""

        def __init__(self, file: io.RawIOBase | io.BufferedIOBase) -> None:
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.torch = _torch()
            self.found: dict[int, TorchValue] = {}

        def persistent_id(self, obj: UserValue) -> tuple[str, int, TorchValue | None] | None:
            st = _untyped(obj, self.torch)
            if st is None:
                return None
            untyped, dtype = st
            key = untyped._cdata
            self.found.setdefault(key, untyped)
            return ("storage", key, dtype)

        def reducer_override(self, obj: UserValue) -> object:
            # a reduce tuple or NotImplemented: for the pickling machinery only, never read here
            why = _refusal(obj)
            if why is not None:
                raise _Refused(why)
            return super().reducer_override(obj)

    return Writer


class _Discard(io.RawIOBase):
    """A file that keeps nothing: what the dry run pickles into."""

    def writable(self) -> bool:
        return True

    def write(self, b: ReadableBuffer) -> int:
        return memoryview(b).nbytes


@dataclass
class Manifest:
    """What a shipment holds: the names sent by value and by module name, and how their storages'
    bytes travel (``bytes_by_way``: :data:`HOST` or :data:`IPC` -> bytes)."""

    values: list[str] = field(default_factory=list)
    modules: dict[str, str] = field(default_factory=dict)  # alias -> module name
    storages: int = 0
    bytes_by_way: dict[str, int] = field(default_factory=dict)
    #: CUDA bytes per device, copied once more in the subprocess
    device_copy: dict[str, int] = field(default_factory=dict)
    #: why some CUDA bytes went through the host
    host_reasons: list[str] = field(default_factory=list)
    #: the notebook's storages, kept alive until the subprocess has copied them
    keep: list[Any] = field(default_factory=list, repr=False)

    def note(self) -> str:
        """One sentence for the report's notes: how the names travelled and what the copy costs."""
        from ...units import format_si

        if not self.values and not self.modules:
            return "Shipped no names (the cell reads none from the notebook)."
        parts = [f"{len(self.values) + len(self.modules)} names in one serialization"]
        ways = []
        if self.bytes_by_way.get(IPC):
            ways.append(f"{format_si(self.bytes_by_way[IPC], 'B')} of CUDA tensors by CUDA IPC")
        if self.bytes_by_way.get(HOST):
            ways.append(f"{format_si(self.bytes_by_way[HOST], 'B')} through the host")
        if ways:
            parts.append(f"{self.storages} storages: " + ", ".join(ways))
        if self.device_copy:
            parts.append(
                "the subprocess' copy takes "
                + ", ".join(
                    f"{format_si(n, 'B')} on {d}" for d, n in sorted(self.device_copy.items())
                )
            )
        text = "Shipped " + "; ".join(parts) + "."
        if self.host_reasons:
            text += " Through the host: " + "; ".join(dict.fromkeys(self.host_reasons)) + "."
        return text


def _dump_named(writer: pickle.Pickler, values: dict[str, Any]) -> None:
    """Each name, then its value, through one pickler: its memo spans them all (identity across
    names holds), and the subprocess can say which name failed to load."""
    for name, value in values.items():
        writer.dump(name)
        writer.dump(value)


def _values_of(
    names: list[str], namespace: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    modules: dict[str, str] = {}
    for name in dict.fromkeys(names):
        if name not in namespace or name in _IPYTHON_NAMES:
            continue  # assigned in the cell, or an error the cell itself will raise
        value = namespace[name]
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
        else:
            values[name] = value
    return values, modules


def _dry_run(values: dict[str, Any]) -> dict[str, str]:
    """Every name that cannot travel, with why: the whole namespace pickled once into nothing
    (storages left out), and name by name only where that fails."""
    writer = _pickler_class()

    def problem(named: dict[str, Any]) -> str | None:
        try:
            _dump_named(writer(_Discard()), named)
        except _Refused as exc:  # met inside a value: say what holds it
            alone = len(named) == 1 and _refusal(next(iter(named.values()))) is not None
            return exc.why if alone else f"holds {exc.why}"
        except RecursionError:
            return "nested too deeply to pickle: make it in the cell, or with --setup"
        except Exception as exc:  # noqa: BLE001 - any pickling failure means: cannot travel
            what = type(next(iter(named.values()))).__name__ if len(named) == 1 else "a value"
            return f"{what} cannot be pickled ({type(exc).__name__}: {exc})"[:240]
        return None

    if problem(values) is None:
        return {}
    each = {n: problem({n: v}) for n, v in values.items()}
    found = {n: why for n, why in each.items() if why is not None}
    if not found:  # each travels alone but not together: say so of all
        found = {", ".join(values): "these cannot be pickled together: make them with --setup"}
    return found


def _ipc_way(untyped: TorchValue, for_ranks: bool) -> tuple[str, Any]:
    """(IPC, the handle) where the subprocess can open ``untyped``'s memory; else (HOST, why)."""
    if for_ranks:
        return HOST, "ranks load every tensor onto their own GPU"
    if os.environ.get("GPUMAGIC_SHIP_IPC", "1") == "0":
        return HOST, "GPUMAGIC_SHIP_IPC=0"
    try:
        return IPC, untyped._share_cuda_()
    except Exception as exc:  # noqa: BLE001 - the allocator cannot share it: the host carries it
        return HOST, f"CUDA IPC refused a storage ({type(exc).__name__}: {str(exc)[:80]})"


def _check_fits(device_copy: dict[str, int], torch: types.ModuleType) -> None:
    """A second copy of the CUDA tensors that cannot fit is said before anything is written."""
    for dev, nbytes in device_copy.items():
        try:
            free, _total = torch.cuda.mem_get_info(torch.device(dev))
        except Exception:  # noqa: BLE001 - no reading: the subprocess will say it if it runs out
            continue
        if nbytes + DEVICE_MARGIN > free:
            from ...units import format_si

            raise ShippingError(
                {
                    f"(the CUDA tensors on {dev})": (
                        f"the subprocess needs its own copy, {format_si(nbytes, 'B')}, and "
                        f"{dev} has {format_si(free, 'B')} free (1 GiB is kept for its context): "
                        "free memory in the notebook (del what the cell does not need, "
                        "torch.cuda.empty_cache()), or make the large tensors with --setup"
                    )
                }
            )


def ship(
    names: list[str],
    namespace: Mapping[str, Any],
    directory: str,
    checked: Callable[[], None] | None = None,
    for_ranks: bool = False,
) -> Manifest:
    """Write the values of ``names`` found in ``namespace`` to ``directory`` in one serialization;
    raise ShippingError listing every name that cannot travel (nothing is written then).
    ``checked()``, if given, is called once every name is known to travel, before the writing (a
    child may start meanwhile). ``for_ranks`` (``--nproc``): each rank loads the CUDA tensors onto
    its own device, so CUDA storages go through the host. The returned :class:`Manifest` keeps
    the notebook's CUDA storages alive until it is dropped (after the subprocess has loaded)."""
    values, modules = _values_of(names, namespace)
    problems = _dry_run(values)
    if problems:
        raise ShippingError(problems)
    torch = _torch()
    buffer = io.BytesIO()
    writer = _pickler_class()(buffer)
    _dump_named(writer, values)
    manifest = Manifest(values=list(values), modules=modules)
    plan = []
    for key, untyped in writer.found.items():
        device = str(untyped.device)
        way, detail = HOST, None
        if untyped.device.type == "cuda":
            way, detail = _ipc_way(untyped, for_ranks)
            if way == HOST:
                manifest.host_reasons.append(detail)
                detail = None
            target = "each rank's GPU" if for_ranks else device
            manifest.device_copy[target] = manifest.device_copy.get(target, 0) + untyped.nbytes()
        plan.append((key, untyped, device, way, detail))
    if manifest.device_copy and not for_ranks:
        assert torch is not None  # a storage was found: torch is imported
        _check_fits(manifest.device_copy, torch)
    if checked is not None:
        checked()
    descriptors = []
    offset = 0
    with open(os.path.join(directory, BLOB), "wb") as blob:
        for key, untyped, device, way, detail in plan:
            nbytes = untyped.nbytes()
            entry = {"key": key, "device": device, "nbytes": nbytes, "way": way}
            if way == IPC:
                entry["handle"] = detail
                manifest.keep.append(untyped)
            elif nbytes:
                assert torch is not None  # a storage was found: torch is imported
                host = untyped.cpu() if untyped.device.type != "cpu" else untyped
                view = torch.empty(0, dtype=torch.uint8).set_(host, 0, (nbytes,), (1,))
                blob.write(memoryview(view.numpy()))
                entry["offset"] = offset
                offset += nbytes
            manifest.bytes_by_way[way] = manifest.bytes_by_way.get(way, 0) + nbytes
            descriptors.append(entry)
    manifest.storages = len(descriptors)
    with open(os.path.join(directory, STORAGES), "wb") as f:
        pickle.dump(descriptors, f)
    with open(os.path.join(directory, VALUES), "wb") as f:
        f.write(buffer.getbuffer())
    with open(os.path.join(directory, MANIFEST), "wb") as f:
        pickle.dump({"values": manifest.values, "modules": modules}, f)
    return manifest


def _load_storages(
    directory: str, device: TorchValue | None, torch: types.ModuleType
) -> dict[int, TorchValue]:
    """Each shipped storage, copied into memory this process owns (``device``: a rank's GPU,
    where every CUDA storage goes)."""
    with open(os.path.join(directory, STORAGES), "rb") as f:
        descriptors = pickle.load(f)
    if not descriptors:
        return {}
    blob_path = os.path.join(directory, BLOB)
    size = os.path.getsize(blob_path)
    blob = torch.from_file(blob_path, shared=False, size=size, dtype=torch.uint8) if size else None
    if any(d["way"] == IPC for d in descriptors):
        torch.cuda.init()  # opening a CUDA IPC handle before CUDA's start crashes the process
    built: dict[int, TorchValue] = {}
    for d in descriptors:
        target = d["device"]
        if device is not None and target.startswith("cuda"):
            target = str(device)
        n = d["nbytes"]
        if d["way"] == IPC:
            shared = torch.UntypedStorage._new_shared_cuda(*d["handle"])
            own = torch.UntypedStorage(n, device=target)
            own.copy_(shared)
            del shared
        elif n == 0:
            own = torch.UntypedStorage(0, device=target)
        else:
            assert blob is not None  # a storage of n > 0 bytes was written to the blob
            piece = blob[d["offset"] : d["offset"] + n]
            own = (
                piece.clone() if target == "cpu" else piece.to(target, copy=True)
            ).untyped_storage()
        built[d["key"]] = own
    if any(d["way"] == IPC for d in descriptors):
        torch.cuda.synchronize()  # every copy made before the notebook may free its memory
    return built


def restore(directory: str, device: TorchValue | None = None) -> dict[str, Any]:
    """The namespace ``ship`` wrote (used by the runner in the subprocess). With a CUDA ``device``
    (a rank's, under ``--nproc``) every CUDA tensor, a module's parameters included, comes back on
    that device whatever device it was saved from: each rank gets its own copy on its own GPU; CPU
    tensors stay on the CPU."""
    import importlib

    with open(os.path.join(directory, MANIFEST), "rb") as f:
        m = pickle.load(f)
    ns: dict[str, Any] = {}
    for alias, modname in m["modules"].items():
        ns[alias] = importlib.import_module(modname)
    if not m["values"]:
        return ns
    torch = _torch()
    storages = _load_storages(directory, device, torch) if torch is not None else {}

    class Reader(pickle.Unpickler):
        def persistent_load(self, pid: tuple[str, int, TorchValue | None]) -> TorchValue:
            _tag, key, dtype = pid
            untyped = storages[key]
            if dtype is None:
                return untyped
            assert torch is not None  # the storage above was loaded by it
            return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)

    with open(os.path.join(directory, VALUES), "rb") as f:
        reader = Reader(f)
        for _ in m["values"]:
            name = reader.load()
            try:
                ns[name] = reader.load()
            except Exception as exc:
                raise RestoreError(name, exc) from exc
    _rewrap_schedulers(ns, torch)
    return ns


class RestoreError(RuntimeError):
    """A shipped name that could not be rebuilt in the subprocess (a module it needs is not
    importable there, a class's ``__setstate__`` raised): the name, and the error."""

    def __init__(self, name: str, exc: BaseException) -> None:
        super().__init__(
            f"{name!r} could not be rebuilt in the subprocess ({type(exc).__name__}: {exc}). It "
            f"runs {sys.executable} in {os.getcwd()}: what {name!r} needs must be importable "
            "there, or make it with --setup."
        )
        self.name = name


def _rewrap_schedulers(ns: Mapping[str, Any], torch: types.ModuleType | None) -> None:
    """An LR scheduler wraps its optimizer's ``step`` to see it called; an optimizer's pickle
    keeps its state, not that wrapper, so a restored pair would warn that ``optimizer.step()`` was
    overridden. The wrapper is put back as the scheduler put it (torch/optim/lr_scheduler.py)."""
    import functools
    import weakref

    base = getattr(getattr(torch, "optim", None), "lr_scheduler", None)
    base = getattr(base, "LRScheduler", None)
    if base is None:
        return
    for value in ns.values():
        opt = getattr(value, "optimizer", None) if isinstance(value, base) else None
        if opt is None or hasattr(opt.step, "_wrapped_by_lr_sched"):
            continue
        func, opt_ref = opt.step.__func__, weakref.ref(opt)

        def wrapper(
            *args: Any,
            _func: types.FunctionType = func,
            _ref: Callable[[], TorchValue] = opt_ref,
            **kwargs: Any,
        ) -> TorchValue:
            target = _ref()
            target._opt_called = True
            return _func.__get__(target, target.__class__)(*args, **kwargs)

        wrapper = functools.wraps(func)(wrapper)
        wrapper._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
        opt.step = wrapper


def onto(device: TorchValue | None) -> Callable[[TorchValue, str], TorchValue] | None:
    """``torch.load``'s ``map_location`` that puts every CUDA storage on ``device`` (None: where it
    was saved)."""
    if device is None or getattr(device, "type", None) != "cuda":
        return None
    index = device.index if device.index is not None else 0
    return lambda storage, location: (
        storage.cuda(index) if str(location).startswith("cuda") else storage
    )


def release(manifest: Manifest | None) -> None:
    """Let the notebook's shared CUDA storages go once the subprocess has its copies."""
    if manifest is None or not manifest.keep:
        return
    manifest.keep.clear()
    torch = _torch()
    with contextlib.suppress(Exception):
        if torch is not None:  # it is, since storages were kept
            torch.cuda.ipc_collect()
