"""Rotary position embeddings exactly as the SDK's CPU backend (backends/cpu/ops.cpp, rope) computes them.

theta_i = pos * freq_scale * base^(-2i/rope_dim) / factor_i, where base^(-2i/rope_dim) is built by repeated
float32 multiplication (as ggml does), so the angles, and therefore the rotated keys the draft cross-attends,
match the runtime's to the last bits at the large positions Anchor-Offset indices produce.
NORM (llama) rotates neighbouring pairs (2i, 2i+1); NEOX (qwen2) rotates the halves (i, i + rope_dim/2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch


@dataclass(frozen=True)
class RopeConfig:
    rope_dim: int
    freq_base: float
    freq_scale: float = 1.0          # 1 / linear scaling factor
    neox: bool = False
    freq_factors: Optional[tuple] = None  # llama3 scaling: per-pair divisors (rope_freqs.weight); phi3: LongRoPE's
    attn_factor: float = 1.0              # phi3's LongRoPE: cos and sin times this (transformers' attention_factor)


def rope_angles(positions: torch.Tensor, cfg: RopeConfig) -> torch.Tensor:
    """positions (any integer shape) -> angles [..., rope_dim/2] in float32."""
    half = cfg.rope_dim // 2
    theta_scale = np.float32(np.power(np.float32(cfg.freq_base), np.float32(-2.0) / np.float32(cfg.rope_dim)))
    theta = positions.to(torch.float32)
    cols = []
    for i in range(half):
        factor = 1.0 if cfg.freq_factors is None else float(cfg.freq_factors[i])
        cols.append(np.float32(cfg.freq_scale) * (theta / np.float32(factor)))
        theta = theta * float(theta_scale)
    return torch.stack(cols, dim=-1)


def apply_rope(x: torch.Tensor, angles: torch.Tensor, cfg: RopeConfig) -> torch.Tensor:
    """x [B, L, H, head_dim], angles [B, L, rope_dim/2] -> rotated copy (dims past rope_dim pass through)."""
    half = cfg.rope_dim // 2
    cos = (torch.cos(angles) * cfg.attn_factor).unsqueeze(2).to(x.dtype)
    sin = (torch.sin(angles) * cfg.attn_factor).unsqueeze(2).to(x.dtype)
    rot, rest = x[..., :cfg.rope_dim], x[..., cfg.rope_dim:]
    if cfg.neox:
        a, b = rot[..., :half], rot[..., half:]
        out = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    return torch.cat([out, rest], dim=-1) if rest.shape[-1] else out
