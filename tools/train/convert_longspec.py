#!/usr/bin/env python3
"""Entry point: convert an official LongSpec checkpoint to a draft GGUF (see specula_train/convert_longspec.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specula_train.convert_longspec import main  # noqa: E402

if __name__ == "__main__":
    main()
