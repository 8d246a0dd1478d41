"""Tensors at the edge of mapped GPU memory: a read or write one byte outside them faults.

The caching allocator hands out blocks inside larger mapped segments, so a kernel that reads one
row past the end of its input (a load guard `r <= rows` for `r < rows`) or one element before its
start (a halo read at index -1) reads mapped memory: nothing faults, and when the value read is
never used (a tile element no output takes) no answer changes either. `at_memory_edge(t, "end")`
copies `t` into memory of its own, placed with the CUDA driver's virtual memory management API so
that its last byte is the last byte of a mapping, with reserved but unmapped address space after
it; `"start"` places its first byte at the mapping's first byte, unmapped space before it. An
access outside the tensor then fails the op with CUDA's "an illegal memory access was encountered".

The driver is called through ctypes on libcuda.so.1 (no build step). Physical memory is whole
allocation granules (2 MiB on current GPUs) per tensor, so this is for the small tensors of checks.
"""
from __future__ import annotations

import ctypes
import sys
import weakref

import torch

# CUDA driver API constants (cuda.h, CUDA 12 and 13)
CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_HANDLE_TYPE_NONE = 0

WHERE = ("end", "start")


class CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class CUmemAllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", CUmemLocation),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class CUmemAccessDesc(ctypes.Structure):
    _fields_ = [("location", CUmemLocation), ("flags", ctypes.c_int)]


CUdeviceptr = ctypes.c_ulonglong
CUmemGenericAllocationHandle = ctypes.c_ulonglong

# (name, argument types) of every driver call made here; each returns a CUresult (int, 0: success)
_SIGNATURES = {
    "cuCtxGetCurrent": [ctypes.POINTER(ctypes.c_void_p)],
    "cuMemGetAllocationGranularity": [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(CUmemAllocationProp), ctypes.c_int],
    "cuMemAddressReserve": [ctypes.POINTER(CUdeviceptr), ctypes.c_size_t, ctypes.c_size_t, CUdeviceptr,
                            ctypes.c_ulonglong],
    "cuMemCreate": [ctypes.POINTER(CUmemGenericAllocationHandle), ctypes.c_size_t, ctypes.POINTER(CUmemAllocationProp),
                    ctypes.c_ulonglong],
    "cuMemMap": [CUdeviceptr, ctypes.c_size_t, ctypes.c_size_t, CUmemGenericAllocationHandle, ctypes.c_ulonglong],
    "cuMemSetAccess": [CUdeviceptr, ctypes.c_size_t, ctypes.POINTER(CUmemAccessDesc), ctypes.c_size_t],
    "cuMemUnmap": [CUdeviceptr, ctypes.c_size_t],
    "cuMemRelease": [CUmemGenericAllocationHandle],
    "cuMemAddressFree": [CUdeviceptr, ctypes.c_size_t],
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
    "cuDeviceGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int],
}
CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102

# data pointer -> the memory placed there (weakly: the tensors keep it alive), for `mapping_of`
_owners: "weakref.WeakValueDictionary[int, _EdgeMemory]" = weakref.WeakValueDictionary()


def _load():
    """The CUDA driver library with the signatures of `_SIGNATURES`, or the error that kept it out."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return str(e)
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return lib


# Loaded once, at import (it initializes nothing), and never reassigned: the grading process's
# snapshot of the grader's own state (grader.verify.integrity), taken after the import, then sees
# it unchanged; a submission that swapped it for a stand-in is tampering
_DRIVER = _load()


def _lib():
    if isinstance(_DRIVER, str):
        raise RuntimeError(f"at_memory_edge: cannot load the CUDA driver (libcuda.so.1): {_DRIVER}")
    return _DRIVER


def _check(result: int, call: str) -> None:
    if result != 0:
        text = ctypes.c_char_p()
        try:
            _lib().cuGetErrorString(result, ctypes.byref(text))
        except Exception:  # noqa: BLE001: the message is a courtesy
            pass
        detail = text.value.decode(errors="replace") if text.value else "unknown error"
        raise RuntimeError(f"at_memory_edge: {call} failed with CUresult {result} ({detail})")


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def placement(nbytes: int, granularity: int, where: str) -> dict[str, int]:
    """Where a tensor of `nbytes` (> 0) goes, as byte offsets from the start of its reserved range:
    `reserve` bytes are reserved, `mapped` bytes mapped from offset `map_at`, and the tensor's first
    byte is at `data_at`. The unmapped guard before and after the mapping is at least one granule and
    at least as long as the mapping (address space only, no memory), so an access up to a whole
    tensor's length outside it faults. "end": the tensor's last byte is the mapping's last byte;
    "start": its first byte is the mapping's first."""
    if where not in WHERE:
        raise ValueError(f"where must be one of {WHERE}, got {where!r}")
    if nbytes <= 0 or granularity <= 0:
        raise ValueError(f"placement needs nbytes > 0 and granularity > 0, got {nbytes}, {granularity}")
    mapped = _round_up(nbytes, granularity)
    guard = mapped
    data_at = guard + (mapped - nbytes if where == "end" else 0)
    return {"reserve": guard + mapped + guard, "map_at": guard, "mapped": mapped, "data_at": data_at}


def _ensure_context(device: int) -> None:
    """A CUDA context current on this thread for `device` (the driver calls act in it): torch's
    primary context, made current by a runtime call on that device."""
    torch.cuda.synchronize(device)
    ctx = ctypes.c_void_p()
    _check(_lib().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        raise RuntimeError("at_memory_edge: no CUDA context is current on this thread after a CUDA call")


def _device_granularity(device: int, prop: CUmemAllocationProp) -> int:
    """The device's minimum allocation granularity (asked each time: a module-level cache would be
    grader state that changes during grading, which the integrity snapshot reports as tampering)."""
    size = ctypes.c_size_t()
    _check(_lib().cuMemGetAllocationGranularity(ctypes.byref(size), ctypes.byref(prop),
                                                CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity")
    return size.value


class _EdgeMemory:
    """Device memory of its own for `nbytes`, placed by `placement`; exposes the tensor's bytes through
    `__cuda_array_interface__` (torch keeps this object alive as long as any tensor uses them) and
    frees everything when collected."""

    def __init__(self, nbytes: int, device: int, where: str):
        lib = _lib()
        _ensure_context(device)
        prop = CUmemAllocationProp()
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = device
        where_ = placement(nbytes, _device_granularity(device, prop), where)
        self.device, self.nbytes = device, nbytes
        self.reserve, self.mapped = where_["reserve"], where_["mapped"]
        self.base = self.handle = self.map_ptr = None
        try:
            base = CUdeviceptr()
            _check(lib.cuMemAddressReserve(ctypes.byref(base), self.reserve, 0, 0, 0), "cuMemAddressReserve")
            self.base = base.value
            handle = CUmemGenericAllocationHandle()
            _check(lib.cuMemCreate(ctypes.byref(handle), self.mapped, ctypes.byref(prop), 0), "cuMemCreate")
            self.handle = handle.value
            _check(lib.cuMemMap(self.base + where_["map_at"], self.mapped, 0, self.handle, 0), "cuMemMap")
            self.map_ptr = self.base + where_["map_at"]
            access = CUmemAccessDesc()
            access.location.type = CU_MEM_LOCATION_TYPE_DEVICE
            access.location.id = device
            access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            _check(lib.cuMemSetAccess(self.map_ptr, self.mapped, ctypes.byref(access), 1), "cuMemSetAccess")
        except BaseException:
            self._free(sync=False)
            raise
        self.ptr = self.base + where_["data_at"]
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                                         "version": 2}

    @property
    def mapping(self) -> tuple[int, int]:
        """The mapped range [first byte, one past the last byte)."""
        return self.map_ptr, self.map_ptr + self.mapped

    def _free(self, sync: bool = True) -> None:
        lib = _DRIVER
        if isinstance(lib, str):
            return
        if sync:
            try:  # work still queued on the tensor must end before its memory goes
                torch.cuda.synchronize(self.device)
            except Exception:  # noqa: BLE001: a lost context (a kernel faulted): free what the driver still frees
                pass
        if self.map_ptr is not None:
            lib.cuMemUnmap(self.map_ptr, self.mapped)
            self.map_ptr = None
        if self.handle is not None:
            lib.cuMemRelease(self.handle)
            self.handle = None
        if self.base is not None:
            lib.cuMemAddressFree(self.base, self.reserve)
            self.base = None

    def __del__(self):
        if sys is None or sys.is_finalizing():  # the process ends: the driver frees it all
            return
        try:
            self._free()
        except Exception:  # noqa: BLE001: never raise from a finalizer
            pass


def unsupported(device: int) -> str | None:
    """Why tensors cannot be placed at a memory edge on this device (no driver library, or a GPU or a
    virtualized one without the virtual memory management API), or None where they can."""
    if isinstance(_DRIVER, str):
        return f"the CUDA driver library could not be loaded ({_DRIVER})"
    _ensure_context(device)
    dev, value = ctypes.c_int(), ctypes.c_int()
    try:
        _check(_DRIVER.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        _check(_DRIVER.cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                            dev.value), "cuDeviceGetAttribute")
    except RuntimeError as e:
        return str(e)
    return None if value.value else "this GPU does not support CUDA's virtual memory management"


def at_memory_edge(t: torch.Tensor, where: str) -> torch.Tensor | None:
    """A contiguous copy of `t` (values, shape, dtype, requires_grad) in GPU memory of its own, at the
    edge of its mapping: where="end", its last byte is the mapping's last (any access past the end
    faults); where="start", its first byte is the mapping's first (any access before index 0 faults).
    None for an empty or non-CUDA tensor (nothing to place).

    With "end", a tensor whose byte count is not a multiple of 16 has a data pointer aligned to its
    element size only (not to 16 bytes): intended, so that scalar paths are checked at the true edge;
    an op must not assume more alignment than PyTorch gives (a view with an offset has the same)."""
    if where not in WHERE:
        raise ValueError(f"where must be one of {WHERE}, got {where!r}")
    if not isinstance(t, torch.Tensor) or not t.is_cuda or t.numel() == 0:
        return None
    device = t.device.index if t.device.index is not None else torch.cuda.current_device()
    nbytes = t.numel() * t.element_size()
    memory = _EdgeMemory(nbytes, device, where)
    _owners[memory.ptr] = memory
    raw = torch.as_tensor(memory, device=torch.device("cuda", device))
    out = raw.view(t.dtype).view(t.shape)
    with torch.no_grad():
        out.copy_(t.detach())
    torch.cuda.synchronize(device)  # the copy made on the current stream is done before any other stream reads it
    return out.requires_grad_(t.requires_grad)


def mapping_of(t: torch.Tensor) -> tuple[int, int] | None:
    """The mapped range ([first byte, one past the last)) of a tensor `at_memory_edge` made (or of a
    view starting at its first byte), or None."""
    owner = _owners.get(t.data_ptr())
    return owner.mapping if owner is not None else None
