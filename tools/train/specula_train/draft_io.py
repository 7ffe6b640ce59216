"""Draft files: the trained torch draft <-> the SDK's LongSpec draft GGUF (sdk/src/speculative/longspec_draft_file.h).

The binding metadata (target architecture, sizes, tokenizer fingerprint, RoPE settings) is not recomputed here:
the SDK writes it for the target (specula_draft_write_random, the same code that later checks it), and the
exporter copies it, overriding only what the trainer chose (window, MLP width, name) and adding provenance.
"""
from __future__ import annotations

import os
import tempfile
from typing import Dict, Optional, Tuple

import numpy as np
import torch

from . import sdk
from .gguf import BF16, F16, F32, GgufReader, GgufWriter

# torch (official checkpoint) name -> GGUF tensor name, in the file order the SDK writes.
TENSOR_NAMES: Tuple[Tuple[str, str], ...] = (
    ("input_layernorm.weight", "blk.0.attn_norm.weight"),
    ("self_attn.q_proj.weight", "blk.0.attn_q.weight"),
    ("self_attn.q_proj.bias", "blk.0.attn_q.bias"),
    ("self_attn.k_proj.weight", "blk.0.attn_k.weight"),
    ("self_attn.k_proj.bias", "blk.0.attn_k.bias"),
    ("self_attn.v_proj.weight", "blk.0.attn_v.weight"),
    ("self_attn.v_proj.bias", "blk.0.attn_v.bias"),
    ("self_attn.o_proj.weight", "blk.0.attn_output.weight"),
    ("post_self_attention_layernorm.weight", "blk.0.cross_attn_norm.weight"),
    ("cross_attn.q_proj.weight", "blk.0.cross_attn_q.weight"),
    ("cross_attn.q_proj.bias", "blk.0.cross_attn_q.bias"),
    ("cross_attn.o_proj.weight", "blk.0.cross_attn_output.weight"),
    ("post_cross_attention_layernorm.weight", "blk.0.ffn_norm.weight"),
    ("mlp.gate_proj.weight", "blk.0.ffn_gate.weight"),
    ("mlp.up_proj.weight", "blk.0.ffn_up.weight"),
    ("mlp.down_proj.weight", "blk.0.ffn_down.weight"),
)
# Present in official checkpoints, unused at inference (the cross-attention reads the target's K/V directly).
UNUSED_NAMES = ("cross_attn.k_proj.weight", "cross_attn.k_proj.bias", "cross_attn.v_proj.weight", "cross_attn.v_proj.bias")
TYPE_BY_NAME = {"f32": F32, "f16": F16, "bf16": BF16}


def binding_metadata(target_path: str) -> GgufReader:
    """The SDK's draft metadata for this target (written by the SDK to a temporary file and read back)."""
    model = sdk.Model(target_path)
    try:
        fd, tmp = tempfile.mkstemp(suffix=".gguf")
        os.close(fd)
        model.write_random_draft(tmp, window=512)
        return GgufReader(tmp)
    finally:
        model.close()


def write_draft_gguf(state: Dict[str, np.ndarray], target_path: str, out_path: str, window: int,
                     weight_type: str = "f32", name: str = "LongSpec draft", extra: Optional[Dict[str, object]] = None):
    """state: official names -> arrays (torch layout). Matrices are stored as weight_type, norms/biases as F32."""
    missing = [t for t, _ in TENSOR_NAMES if t not in state]
    if missing:
        raise ValueError(f"draft state is missing {', '.join(missing)}")
    template = binding_metadata(target_path)
    try:
        w = GgufWriter()
        n_ff = state["mlp.gate_proj.weight"].shape[0]
        w.copy_metadata(template, skip=("general.name", "longspec.attention.sliding_window", "longspec.feed_forward_length"))
        w.add_string("general.name", name)
        w.add_u32("longspec.attention.sliding_window", window)
        w.add_u32("longspec.feed_forward_length", n_ff)
        for key, value in (extra or {}).items():
            if isinstance(value, str):
                w.add_string(key, value)
            elif isinstance(value, float):
                w.add_f32(key, value)
            else:
                w.add_u32(key, int(value))
        for torch_name, gguf_name in TENSOR_NAMES:
            a = np.asarray(state[torch_name], dtype=np.float32)
            ttype = TYPE_BY_NAME[weight_type] if a.ndim == 2 else F32
            w.add_tensor(gguf_name, a, ttype)
        w.write(out_path)
    finally:
        path = template.path
        template.close()
        os.unlink(path)


def export_draft(draft: torch.nn.Module, target_path: str, out_path: str, weight_type: str = "f32",
                 extra: Optional[Dict[str, object]] = None):
    state = {k: v.detach().float().cpu().numpy() for k, v in draft.state_dict().items()}
    write_draft_gguf(state, target_path, out_path, window=draft.window, weight_type=weight_type,
                     name="LongSpec draft (trained with tools/train)", extra=extra)


def read_draft_gguf(path: str) -> Tuple[Dict[str, torch.Tensor], int]:
    """-> (state dict with official names, window)."""
    with GgufReader(path) as r:
        if r.get("general.architecture") != "longspec":
            raise ValueError(f"{path}: not a LongSpec draft (general.architecture = {r.get('general.architecture')!r})")
        state = {t: torch.from_numpy(r.tensor(g).copy()) for t, g in TENSOR_NAMES}
        return state, int(r.require("longspec.attention.sliding_window"))
