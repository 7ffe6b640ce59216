"""The LongSpec draft layer in torch, computed exactly as the SDK's runtime computes it
(sdk/src/speculative/longspec_drafter.cpp):

    h0 = embed(token)                                   target's embedding, frozen
    x  = h0 + SelfAttn(RMSNorm_in(h0))                  sliding window W, RoPE on q and k, q/k/v with bias
    x  = x  + CrossAttn(RMSNorm_postSA(x))              q from the draft (RoPE, bias), K/V = the target's last
                                                        layer cache (post-RoPE), no projection of its own
    x  = x  + MLP(RMSNorm_postCA(x))                    SwiGLU
    logits = lm_head(x)                                 target's head, frozen, NO final norm

Parameter names are the official checkpoints' (sail/longspec-*: self_attn.q_proj, cross_attn.q_proj, mlp.gate_proj,
input_layernorm, post_self_attention_layernorm, post_cross_attention_layernorm), so their state dicts load as they
are. Their cross_attn.k_proj / v_proj are unused at inference; we do not create them.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .rope import apply_rope, rope_angles
from .target import TargetConfig, attention, rms_norm


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class _Attn(nn.Module):
    def __init__(self, d: int, n_head: int, n_head_kv: int, head_dim: int, with_kv: bool):
        super().__init__()
        self.q_proj = nn.Linear(d, n_head * head_dim, bias=True)
        if with_kv:
            self.k_proj = nn.Linear(d, n_head_kv * head_dim, bias=True)
            self.v_proj = nn.Linear(d, n_head_kv * head_dim, bias=True)
        self.o_proj = nn.Linear(n_head * head_dim, d, bias=False)


class _Mlp(nn.Module):
    def __init__(self, d: int, f: int):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def self_attention_mask(L: int, window: int, device=None) -> torch.Tensor:
    """[1, L, L]: query i sees key j when 0 <= i - j <= window (the runtime: q_pos - k_pos <= W, causal)."""
    i = torch.arange(L, device=device).unsqueeze(1)
    j = torch.arange(L, device=device).unsqueeze(0)
    return ((i - j >= 0) & (i - j <= window)).unsqueeze(0)


def cross_attention_mask(L: int, S: int, lags: torch.Tensor) -> torch.Tensor:
    """[B, L, S]: query i sees target key j when j <= i - lag (lag 0: ordinary causal; lag 1: the runtime's first
    step, where the root's own target KV does not exist yet; lag d+1 at tree depth d). lags: [B] (one lag per
    sequence) or [B, L] (one per query) integers."""
    i = torch.arange(L, device=lags.device).view(1, L, 1)
    j = torch.arange(S, device=lags.device).view(1, 1, S)
    per_query = lags.view(-1, L, 1) if lags.dim() == 2 else lags.view(-1, 1, 1)
    return j <= i - per_query


class LongSpecDraft(nn.Module):
    def __init__(self, cfg: TargetConfig, n_ff: Optional[int] = None, window: int = 512, init_scale: float = 0.02):
        super().__init__()
        self.cfg, self.window = cfg, window
        self.n_ff = n_ff or cfg.n_ff
        d = cfg.n_embd
        self.input_layernorm = RMSNorm(d, cfg.norm_eps)
        self.self_attn = _Attn(d, cfg.n_head, cfg.n_head_kv, cfg.head_dim, with_kv=True)
        self.post_self_attention_layernorm = RMSNorm(d, cfg.norm_eps)
        self.cross_attn = _Attn(d, cfg.n_head, cfg.n_head_kv, cfg.head_dim, with_kv=False)
        self.post_cross_attention_layernorm = RMSNorm(d, cfg.norm_eps)
        self.mlp = _Mlp(d, self.n_ff)
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight"):
                continue
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, init_scale)

    def forward(self, h0: torch.Tensor, positions: torch.Tensor, target_k: torch.Tensor, target_v: torch.Tensor,
                lags: torch.Tensor) -> torch.Tensor:
        """h0 [B, L, D] token embeddings, positions [B, L], target_k/v [B, S, Hkv, d] (post-RoPE, positions aligned
        with the first S tokens), lags [B] or [B, L] -> hidden [B, L, D] (feed to the target's lm_head, no final norm)."""
        c = self.cfg
        B, L, _ = h0.shape
        angles = rope_angles(positions, c.rope)
        h = self.input_layernorm(h0)
        sa = self.self_attn
        q = apply_rope(sa.q_proj(h).view(B, L, c.n_head, c.head_dim), angles, c.rope)
        k = apply_rope(sa.k_proj(h).view(B, L, c.n_head_kv, c.head_dim), angles, c.rope)
        v = sa.v_proj(h).view(B, L, c.n_head_kv, c.head_dim)
        a = attention(q, k, v, self_attention_mask(L, self.window, h0.device))
        x = h0 + sa.o_proj(a.reshape(B, L, -1))

        h = self.post_self_attention_layernorm(x)
        ca = self.cross_attn
        q = apply_rope(ca.q_proj(h).view(B, L, c.n_head, c.head_dim), angles, c.rope)
        a = attention(q, target_k.to(q.dtype), target_v.to(q.dtype), cross_attention_mask(L, target_k.shape[1], lags))
        x = x + ca.o_proj(a.reshape(B, L, -1))

        return x + self.mlp(self.post_cross_attention_layernorm(x))
