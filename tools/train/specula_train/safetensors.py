"""Reading and writing .safetensors (the official LongSpec checkpoints' format) without the safetensors package,
which Debian does not ship: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw little-endian data.
"""
from __future__ import annotations

import json
import struct
from typing import Dict

import numpy as np

from .gguf import bf16_to_f32, f32_to_bf16

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """-> name -> float32 array (F32/F16/BF16/F64 tensors)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8 or n > (100 << 20):
        raise ValueError(f"{path}: header length {n} does not fit the file")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise ValueError(f"{path}: header is not JSON ({e})") from None
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(data) - base:
            raise ValueError(f"{path}: tensor '{name}' data range {begin}..{end} is outside the file")
        raw = np.frombuffer(data, dtype=np.uint8, count=end - begin, offset=base + begin)
        dtype, shape = info["dtype"], tuple(info["shape"])
        if dtype == "BF16":
            arr = bf16_to_f32(raw.view("<u2"))
        elif dtype in _DTYPES:
            arr = raw.view(np.dtype(_DTYPES[dtype]).newbyteorder("<"))
        else:
            raise ValueError(f"{path}: tensor '{name}' has dtype {dtype}, which the converter cannot read")
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor '{name}' has {arr.size} values for shape {shape}")
        out[name] = arr.reshape(shape).astype(np.float32)
    return out


def write_safetensors(path: str, tensors: Dict[str, np.ndarray], dtype: str = "F32", metadata=None):
    """Writes float tensors as F32, F16 or BF16 (for tests and tools)."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        if dtype == "F32":
            b = a.astype("<f4").tobytes()
        elif dtype == "F16":
            b = a.astype("<f2").tobytes()
        elif dtype == "BF16":
            b = f32_to_bf16(a).tobytes()
        else:
            raise ValueError(f"dtype {dtype}")
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
