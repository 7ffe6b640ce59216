#!/usr/bin/env python3
"""Copy a GGUF model with its matrices stored as F16, as llama.cpp's `convert_hf_to_gguf.py --outtype f16` stores them:
every 2-D weight becomes F16, 1-D tensors (norms, biases) stay F32, and every metadata key is kept except
general.file_type, which says MOSTLY_F16 (1). Used to vendor code-7m for the demo (models/README.md):

    python3 tools/train/convert_f16.py ../shared/fixtures/models/code-7m/model.gguf models/code-7m-f16.gguf
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specula_train.gguf import F16, F32, T_UINT32, GgufReader, GgufWriter  # noqa: E402


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: convert_f16.py IN.gguf OUT.gguf")
    src, dst = sys.argv[1], sys.argv[2]
    with GgufReader(src) as r:
        w = GgufWriter(alignment=r.alignment)
        w.copy_metadata(r, skip=("general.file_type",))
        w.add("general.file_type", T_UINT32, 1)
        for name, info in r.tensors.items():  # the reader keeps the file's order
            array = r.tensor(name)
            w.add_tensor(name, array, F16 if len(info.dims) >= 2 and info.dims[1] > 1 else F32)
        w.write(dst)
    print(f"{dst}: {os.path.getsize(dst)} bytes")


if __name__ == "__main__":
    main()
