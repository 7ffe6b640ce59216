"""Convert an official LongSpec draft checkpoint (sail/longspec-*: safetensors of LlamaGlideDecoderLayer /
Qwen2GlideDecoderLayer) into the SDK's draft GGUF for a given target GGUF.

    python3 tools/train/convert_longspec.py --checkpoint model.safetensors --target target.gguf --out draft.gguf

Key names (../shared/notes/longspec-implementation.md §1.1): self_attn.{q,k,v}_proj.{weight,bias},
self_attn.o_proj.weight, cross_attn.q_proj.{weight,bias}, cross_attn.o_proj.weight, mlp.{gate,up,down}_proj.weight,
input_layernorm / post_self_attention_layernorm / post_cross_attention_layernorm .weight; checkpoints saved by
the training code carry a "draft_model." prefix, which is stripped (as are "model." and "glide."). The unused
cross_attn.k_proj / v_proj are dropped. Shapes are checked against the target before anything is written.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
from typing import Dict

import numpy as np

from .draft_io import TENSOR_NAMES, UNUSED_NAMES, write_draft_gguf
from .gguf import GgufReader
from .safetensors import read_safetensors
from .target import TargetConfig

PREFIXES = ("draft_model.", "model.", "glide.")


def normalize_names(tensors: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    wanted = {t for t, _ in TENSOR_NAMES} | set(UNUSED_NAMES)
    out = {}
    for name, a in tensors.items():
        key = name
        while key not in wanted and key.startswith(PREFIXES):
            key = key.split(".", 1)[1]
        if key in wanted:
            if key in out:
                raise ValueError(f"checkpoint has '{key}' twice (as '{name}' and another name)")
            out[key] = a
    return out


def expected_shapes(cfg: TargetConfig, n_ff: int) -> Dict[str, tuple]:
    d, q, kv = cfg.n_embd, cfg.n_head * cfg.head_dim, cfg.n_head_kv * cfg.head_dim
    return {
        "input_layernorm.weight": (d,), "post_self_attention_layernorm.weight": (d,),
        "post_cross_attention_layernorm.weight": (d,),
        "self_attn.q_proj.weight": (q, d), "self_attn.q_proj.bias": (q,),
        "self_attn.k_proj.weight": (kv, d), "self_attn.k_proj.bias": (kv,),
        "self_attn.v_proj.weight": (kv, d), "self_attn.v_proj.bias": (kv,),
        "self_attn.o_proj.weight": (d, q),
        "cross_attn.q_proj.weight": (q, d), "cross_attn.q_proj.bias": (q,), "cross_attn.o_proj.weight": (d, q),
        "mlp.gate_proj.weight": (n_ff, d), "mlp.up_proj.weight": (n_ff, d), "mlp.down_proj.weight": (d, n_ff),
    }


def convert(checkpoint: str, target: str, out: str, window: int = 512, weight_type: str = "f16") -> Dict[str, np.ndarray]:
    files = sorted(glob.glob(os.path.join(checkpoint, "*.safetensors"))) if os.path.isdir(checkpoint) else [checkpoint]
    if not files:
        raise FileNotFoundError(f"{checkpoint}: no .safetensors files")
    raw: Dict[str, np.ndarray] = {}
    for f in files:
        raw.update(read_safetensors(f))
    state = normalize_names(raw)
    missing = [t for t, _ in TENSOR_NAMES if t not in state]
    if missing:
        raise ValueError(f"{checkpoint}: not a LongSpec draft checkpoint; missing {', '.join(missing)}")
    with GgufReader(target) as r:
        cfg = TargetConfig.from_gguf(r)
    n_ff = state["mlp.gate_proj.weight"].shape[0]
    for name, shape in expected_shapes(cfg, n_ff).items():
        if tuple(state[name].shape) != shape:
            raise ValueError(f"{checkpoint}: '{name}' has shape {tuple(state[name].shape)}, the target {target} "
                             f"needs {shape} (a draft for another model?)")
    write_draft_gguf(state, target, out, window=window, weight_type=weight_type,
                     name=f"LongSpec draft converted from {os.path.basename(os.path.normpath(checkpoint))}")
    return state


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help=".safetensors file or a directory of them")
    p.add_argument("--target", required=True, help="the target model's GGUF")
    p.add_argument("--out", required=True)
    p.add_argument("--window", type=int, default=512, help="self-attention window (the official drafts use 512)")
    p.add_argument("--type", choices=("f32", "f16", "bf16"), default="f16", help="matrix storage type")
    a = p.parse_args(argv)
    convert(a.checkpoint, a.target, a.out, a.window, a.type)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
