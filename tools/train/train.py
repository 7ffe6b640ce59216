#!/usr/bin/env python3
"""Entry point: `python3 tools/train/train.py --target T.gguf --data DIR --out draft.gguf` (or under torchrun)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specula_train.train import main  # noqa: E402

if __name__ == "__main__":
    main()
