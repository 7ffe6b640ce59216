"""A small GGUF reader and writer (format v2/v3), with numpy dequantization of the types the SDK computes with.

Why our own: the trainer must read the *target* exactly as the runtime does (same tensors, same dequantized
values) and write drafts the runtime loads, and Debian's packages offer no GGUF library (llama.cpp's gguf-py is
not packaged). The format is small: a header, typed key/value metadata, tensor descriptors and aligned data.

Dequantization follows ggml's reference code (ggml-quants.c, dequantize_row_*) block for block, so the floats
the trainer sees are the floats the SDK's scalar reference kernels multiply with.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# Metadata value types.
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)
_SCALAR = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i",
    T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}

# Tensor types (ggml_type ids) and their blocks: (weights per block, bytes per block).
F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 8, 12, 13, 14, 30
TYPE_NAMES = {F32: "F32", F16: "F16", Q4_0: "Q4_0", Q8_0: "Q8_0", Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K", BF16: "BF16"}
BLOCKS = {F32: (1, 4), F16: (1, 2), BF16: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34), Q4_K: (256, 144), Q5_K: (256, 176), Q6_K: (256, 210)}


class GgufError(ValueError):
    """A file that is not a GGUF we can read: the message says what and where."""


@dataclass
class TensorInfo:
    name: str
    dims: Tuple[int, ...]  # ggml order: dims[0] is the contiguous (row) dimension
    type: int
    offset: int            # relative to the data section
    n_bytes: int

    @property
    def shape(self) -> Tuple[int, ...]:
        """numpy/torch order (rows last): [dims[n-1], ..., dims[0]]."""
        return tuple(reversed(self.dims))


class _Cursor:
    def __init__(self, buf, pos: int = 0):
        self.buf, self.pos = buf, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise GgufError(f"truncated file: needs {n} bytes at offset {self.pos}, file has {len(self.buf)}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def scalar(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > (1 << 30):
            raise GgufError(f"string length {n} at offset {self.pos - 8} is implausible")
        return self.take(n).decode("utf-8", errors="strict")

    def value(self, vtype: int, depth: int = 0):
        if vtype in _SCALAR:
            return self.scalar(_SCALAR[vtype])
        if vtype == T_STRING:
            return self.string()
        if vtype == T_ARRAY:
            if depth > 0:
                raise GgufError("nested arrays are not supported")
            etype, n = self.scalar("<I"), self.scalar("<Q")
            if n > (1 << 28):
                raise GgufError(f"array of {n} items is implausible")
            if etype in _SCALAR:  # fast path: numeric arrays straight from the buffer
                fmt = _SCALAR[etype]
                size = struct.calcsize(fmt)
                return list(np.frombuffer(self.take(n * size), dtype=np.dtype(fmt)).tolist())
            return [self.value(etype, depth + 1) for _ in range(n)]
        raise GgufError(f"unknown metadata value type {vtype} at offset {self.pos - 4}")


class GgufReader:
    """Reads metadata and tensors of a GGUF file; tensor data is memory-mapped."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise GgufError(f"{path}: {size} bytes is too short for a GGUF header")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        c = _Cursor(self._map)
        if c.take(4) != GGUF_MAGIC:
            raise GgufError(f"{path}: not a GGUF file (bad magic)")
        self.version = c.scalar("<I")
        if self.version not in (2, 3):
            raise GgufError(f"{path}: GGUF version {self.version} is not supported (2 or 3)")
        n_tensors, n_kv = c.scalar("<Q"), c.scalar("<Q")
        if n_tensors > (1 << 20) or n_kv > (1 << 20):
            raise GgufError(f"{path}: {n_tensors} tensors / {n_kv} keys is implausible")
        self.metadata: Dict[str, Any] = {}
        self.metadata_types: Dict[str, Tuple[int, Optional[int]]] = {}
        for _ in range(n_kv):
            key = c.string()
            vtype = c.scalar("<I")
            etype = None
            if vtype == T_ARRAY:  # peek the element type for round trips
                etype = struct.unpack_from("<I", self._map, c.pos)[0] if c.pos + 4 <= len(self._map) else None
            self.metadata[key] = c.value(vtype)
            self.metadata_types[key] = (vtype, etype)
        self.tensors: Dict[str, TensorInfo] = {}
        for _ in range(n_tensors):
            name = c.string()
            n_dims = c.scalar("<I")
            if not 1 <= n_dims <= 4:
                raise GgufError(f"{path}: tensor '{name}' has {n_dims} dimensions")
            dims = tuple(c.scalar("<Q") for _ in range(n_dims))
            ttype, offset = c.scalar("<I"), c.scalar("<Q")
            if ttype not in BLOCKS:
                # Kept so the file can be inspected; reading such a tensor raises.
                n_bytes = -1
            else:
                per, nb = BLOCKS[ttype]
                if dims[0] % per:
                    raise GgufError(f"{path}: tensor '{name}' row of {dims[0]} is not a whole number of {per}-blocks")
                n_bytes = int(np.prod(dims, dtype=np.int64)) // per * nb
            self.tensors[name] = TensorInfo(name, dims, ttype, offset, n_bytes)
        self.alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise GgufError(f"{path}: general.alignment {self.alignment} is not a power of two")
        self.data_offset = (c.pos + self.alignment - 1) // self.alignment * self.alignment
        for t in self.tensors.values():
            if t.n_bytes >= 0 and self.data_offset + t.offset + t.n_bytes > len(self._map):
                raise GgufError(f"{path}: tensor '{t.name}' data runs past the end of the file (truncated?)")

    def close(self):
        self._map.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)

    def require(self, key: str):
        if key not in self.metadata:
            raise GgufError(f"{self.path}: required metadata '{key}' is missing")
        return self.metadata[key]

    def raw(self, name: str) -> np.ndarray:
        t = self._info(name)
        start = self.data_offset + t.offset
        return np.frombuffer(self._map, dtype=np.uint8, count=t.n_bytes, offset=start)

    def tensor(self, name: str) -> np.ndarray:
        """The tensor as float32, in numpy order (shape = reversed ggml dims)."""
        t = self._info(name)
        return dequantize(self.raw(name), t.type, int(np.prod(t.dims, dtype=np.int64))).reshape(t.shape)

    def _info(self, name: str) -> TensorInfo:
        if name not in self.tensors:
            raise GgufError(f"{self.path}: tensor '{name}' is missing")
        t = self.tensors[name]
        if t.type not in BLOCKS:
            raise GgufError(f"{self.path}: tensor '{name}' has type {t.type}, which the trainer cannot read "
                            f"(supported: {', '.join(TYPE_NAMES.values())})")
        return t


# --- bfloat16 (shared with safetensors.py) ---------------------------------------------------------------------

def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """uint16 bfloat16 bit patterns -> float32 (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> little-endian uint16 bfloat16 bits, rounded to nearest even as ggml's fp32_to_bf16."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


# --- dequantization (ggml-quants.c reference order) ---------------------------------------------------------

def _f16(b: np.ndarray) -> np.ndarray:
    return b.copy().view(np.float16).astype(np.float32)


def _scale_min_k4(scales: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """scales [nb, 12] -> (sc [nb, 8], m [nb, 8]) as get_scale_min_k4."""
    q = scales.astype(np.uint8)
    sc = np.empty((q.shape[0], 8), dtype=np.uint8)
    m = np.empty_like(sc)
    sc[:, :4] = q[:, 0:4] & 63
    m[:, :4] = q[:, 4:8] & 63
    sc[:, 4:] = (q[:, 8:12] & 0xF) | ((q[:, 0:4] >> 6) << 4)
    m[:, 4:] = (q[:, 8:12] >> 4) | ((q[:, 4:8] >> 6) << 4)
    return sc.astype(np.float32), m.astype(np.float32)


def quantize_q8_0(a: np.ndarray) -> np.ndarray:
    """Q8_0 blocks [n / 32, 34] as ggml's x86 quantize_row_q8_0 (llama-quantize on this hardware): d = max|x| / 127
    stored as F16, values x * (127 / max|x|) rounded to nearest even."""
    x = np.ascontiguousarray(a, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1, keepdims=True)
    d = amax / np.float32(127.0)
    with np.errstate(divide="ignore"):
        inv = np.where(amax != 0, np.float32(127.0) / amax, np.float32(0.0)).astype(np.float32)
    out = np.empty((x.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8)
    out[:, 2:] = np.rint(x * inv).astype(np.int8).view(np.uint8)
    return out


def dequantize(raw: np.ndarray, ttype: int, n: int) -> np.ndarray:
    if ttype == F32:
        return raw.view(np.float32).copy()
    if ttype == F16:
        return raw.view(np.float16).astype(np.float32)
    if ttype == BF16:
        return bf16_to_f32(raw.view(np.uint16))
    per, nb = BLOCKS[ttype]
    blocks = raw.reshape(n // per, nb)
    if ttype == Q8_0:
        d = _f16(blocks[:, 0:2])
        q = blocks[:, 2:].view(np.int8).astype(np.float32)
        return (q * d).reshape(-1)
    if ttype == Q4_0:
        d = _f16(blocks[:, 0:2])
        qs = blocks[:, 2:]
        lo = (qs & 0xF).astype(np.int32) - 8
        hi = (qs >> 4).astype(np.int32) - 8
        return (np.concatenate([lo, hi], axis=1).astype(np.float32) * d).reshape(-1)
    if ttype in (Q4_K, Q5_K):
        d = _f16(blocks[:, 0:2])
        dmin = _f16(blocks[:, 2:4])
        sc, m = _scale_min_k4(blocks[:, 4:16])
        if ttype == Q4_K:
            qh, qs = None, blocks[:, 16:144]
        else:
            qh, qs = blocks[:, 16:48], blocks[:, 48:176]
        out = np.empty((blocks.shape[0], 256), dtype=np.float32)
        for j in range(4):  # 64 weights per step: low nibbles then high nibbles of 32 bytes
            ql = qs[:, 32 * j:32 * (j + 1)]
            lo = (ql & 0xF).astype(np.float32)
            hi = (ql >> 4).astype(np.float32)
            if qh is not None:
                lo += ((qh >> (2 * j)) & 1).astype(np.float32) * 16
                hi += ((qh >> (2 * j + 1)) & 1).astype(np.float32) * 16
            d1, m1 = d * sc[:, 2 * j:2 * j + 1], dmin * m[:, 2 * j:2 * j + 1]
            d2, m2 = d * sc[:, 2 * j + 1:2 * j + 2], dmin * m[:, 2 * j + 1:2 * j + 2]
            out[:, 64 * j:64 * j + 32] = d1 * lo - m1
            out[:, 64 * j + 32:64 * j + 64] = d2 * hi - m2
        return out.reshape(-1)
    if ttype == Q6_K:
        ql_all, qh_all = blocks[:, 0:128], blocks[:, 128:192]
        scales = blocks[:, 192:208].view(np.int8).astype(np.float32)
        d = _f16(blocks[:, 208:210])
        out = np.empty((blocks.shape[0], 256), dtype=np.float32)
        for half in range(2):
            ql = ql_all[:, 64 * half:64 * half + 64].astype(np.int32)
            qh = qh_all[:, 32 * half:32 * half + 32].astype(np.int32)
            sc = scales[:, 8 * half:8 * half + 8]
            q1 = ((ql[:, 0:32] & 0xF) | (((qh >> 0) & 3) << 4)) - 32
            q2 = ((ql[:, 32:64] & 0xF) | (((qh >> 2) & 3) << 4)) - 32
            q3 = ((ql[:, 0:32] >> 4) | (((qh >> 4) & 3) << 4)) - 32
            q4 = ((ql[:, 32:64] >> 4) | (((qh >> 6) & 3) << 4)) - 32
            base = 128 * half
            for k, qv in enumerate((q1, q2, q3, q4)):
                s = np.repeat(sc[:, [2 * k, 2 * k + 1]], 16, axis=1)  # is = l / 16 over l in 0..31
                out[:, base + 32 * k:base + 32 * k + 32] = d * s * qv.astype(np.float32)
        return out.reshape(-1)
    raise GgufError(f"dequantization of type {ttype} is not implemented")


# --- writing --------------------------------------------------------------------------------------------------

@dataclass
class GgufWriter:
    """Collects metadata and tensors, then writes a GGUF v3 file in one pass."""
    metadata: List[Tuple[str, int, Any, Optional[int]]] = field(default_factory=list)
    tensors: List[Tuple[str, np.ndarray, int]] = field(default_factory=list)
    alignment: int = DEFAULT_ALIGNMENT

    def add(self, key: str, vtype: int, value, etype: Optional[int] = None):
        if any(k == key for k, *_ in self.metadata):
            raise GgufError(f"duplicate metadata key '{key}'")
        self.metadata.append((key, vtype, value, etype))

    def add_string(self, key, v): self.add(key, T_STRING, str(v))
    def add_u32(self, key, v): self.add(key, T_UINT32, int(v))
    def add_f32(self, key, v): self.add(key, T_FLOAT32, float(v))

    def copy_metadata(self, reader: GgufReader, skip=()):
        for key, value in reader.metadata.items():
            if key in skip or key == "general.alignment":
                continue
            vtype, etype = reader.metadata_types[key]
            self.add(key, vtype, value, etype)

    def add_tensor(self, name: str, array: np.ndarray, ttype: int = F32):
        """array in numpy order (rows last dimension); stored as F32, F16, BF16 or Q8_0 (rows of whole 32-blocks)."""
        if ttype not in (F32, F16, BF16, Q8_0):
            raise GgufError(f"writing tensor type {ttype} is not supported (F32, F16, BF16, Q8_0)")
        if ttype == Q8_0 and array.shape[-1] % 32 != 0:
            raise GgufError(f"'{name}': Q8_0 rows need a multiple of 32 values, not {array.shape[-1]}")
        if any(n == name for n, *_ in self.tensors):
            raise GgufError(f"duplicate tensor '{name}'")
        self.tensors.append((name, np.ascontiguousarray(array, dtype=np.float32), ttype))

    @staticmethod
    def _encode(a: np.ndarray, ttype: int) -> bytes:
        if ttype == F32:
            return a.astype("<f4").tobytes()
        if ttype == F16:
            return a.astype("<f2").tobytes()
        if ttype == Q8_0:
            return quantize_q8_0(a).tobytes()
        return f32_to_bf16(a).tobytes()

    @staticmethod
    def _value(vtype: int, value, etype: Optional[int]) -> bytes:
        if vtype in _SCALAR:
            return struct.pack(_SCALAR[vtype], value)
        if vtype == T_STRING:
            b = value.encode("utf-8")
            return struct.pack("<Q", len(b)) + b
        if vtype == T_ARRAY:
            if etype is None:
                raise GgufError("array metadata needs its element type")
            return struct.pack("<IQ", etype, len(value)) + b"".join(GgufWriter._value(etype, v, None) for v in value)
        raise GgufError(f"cannot write metadata type {vtype}")

    def write(self, path: str):
        out = bytearray()
        out += GGUF_MAGIC + struct.pack("<IQQ", 3, len(self.tensors), len(self.metadata) + 1)
        for key, vtype, value, etype in self.metadata:
            out += self._value(T_STRING, key, None) + struct.pack("<I", vtype) + self._value(vtype, value, etype)
        out += self._value(T_STRING, "general.alignment", None) + struct.pack("<II", T_UINT32, self.alignment)
        datas, offset = [], 0
        for name, a, ttype in self.tensors:
            data = self._encode(a, ttype)
            dims = tuple(reversed(a.shape)) if a.ndim else (1,)
            out += self._value(T_STRING, name, None) + struct.pack("<I", len(dims))
            out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, offset)
            datas.append(data)
            offset += (len(data) + self.alignment - 1) // self.alignment * self.alignment
        out += b"\0" * ((-len(out)) % self.alignment)
        for data in datas:
            out += data + b"\0" * ((-len(data)) % self.alignment)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(out)
        os.replace(tmp, path)
