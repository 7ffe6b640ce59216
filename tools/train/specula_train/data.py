"""Training data: text/code files tokenized with the target's own tokenizer through the SDK (so the ids are the
runtime's ids exactly), each file preceded by BOS, concatenated into one token stream; batches are random
windows of it. Held-out folders can be excluded by path prefix (code-7m's corpus.json lists them).
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import random
from typing import List, Optional, Sequence

import numpy as np
import torch

from . import sdk

SKIP_DIRS = {"test", "tests", "__pycache__", ".git"}


def list_files(roots: Sequence[str], pattern: str = "*", exclude_prefixes: Sequence[str] = (),
               skip_test_dirs: bool = True) -> List[str]:
    """Files under roots matching pattern, sorted; exclude_prefixes are paths relative to a root ("json/")."""
    out = []
    for root in roots:
        root = os.path.abspath(root)
        if os.path.isfile(root):
            out.append(root)
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            if skip_test_dirs:
                dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            rel_dir = os.path.relpath(dirpath, root)
            rel_dir = "" if rel_dir == "." else rel_dir + "/"
            if any(rel_dir.startswith(p) for p in exclude_prefixes):
                dirnames[:] = []
                continue
            for f in filenames:
                if fnmatch.fnmatch(f, pattern) and not any((rel_dir + f).startswith(p) for p in exclude_prefixes):
                    out.append(os.path.join(dirpath, f))
    return sorted(out)


def held_out_prefixes(corpus_json: Optional[str]) -> List[str]:
    if not corpus_json:
        return []
    with open(corpus_json) as f:
        return list(json.load(f).get("held_out_prefixes", []))


def tokenize_files(model_path: str, files: Sequence[str], max_tokens: int, seed: int = 0,
                   cache: Optional[str] = None, log=print) -> np.ndarray:
    """Shuffled files (seeded) tokenized with BOS each, until max_tokens; int32 stream. Cached by content key."""
    key = hashlib.sha256(json.dumps([model_path, list(files), max_tokens, seed]).encode()).hexdigest()[:16]
    if cache:
        path = f"{cache}.{key}.npy"
        if os.path.exists(path):
            return np.load(path)
    model = sdk.Model(model_path, vocab_only=True)
    bos = model.bos
    order = list(files)
    random.Random(seed).shuffle(order)
    chunks, total = [], 0
    for i, f in enumerate(order):
        try:
            with open(f, "rb") as fh:
                text = fh.read()
            text.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        ids = model.tokenize(text)
        if bos >= 0:
            ids = [bos] + ids
        chunks.append(np.asarray(ids, dtype=np.int32))
        total += len(ids)
        if total >= max_tokens:
            break
    model.close()
    stream = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)
    log(f"data: {len(chunks)} files, {len(stream):,} tokens")
    if cache:
        np.save(path, stream)
    return stream


class WindowSampler:
    """Random windows of length L from a token stream; each DDP rank draws from its own seeded generator."""

    def __init__(self, stream: np.ndarray, seq_len: int, seed: int):
        if len(stream) <= seq_len:
            raise ValueError(f"{len(stream)} tokens of data is too little for sequences of {seq_len}")
        self.stream, self.L = torch.from_numpy(stream.astype(np.int64)), seq_len
        self.gen = torch.Generator().manual_seed(seed)

    def batch(self, B: int) -> torch.Tensor:
        starts = torch.randint(0, len(self.stream) - self.L, (B,), generator=self.gen)
        return torch.stack([self.stream[s:s + self.L] for s in starts.tolist()])
