#!/usr/bin/env python3
"""Entry point: generate self-distillation text with the target through the Specula CLI (see specula_train/selfdistill.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specula_train.selfdistill import main  # noqa: E402

if __name__ == "__main__":
    main()
