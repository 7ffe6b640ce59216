"""The frozen target model in torch, read from its GGUF: the straight Llama / Qwen2 / Qwen3 forward pass, returning
what draft training needs (the last layer's post-RoPE keys and values, and the logits). It is also the independent
reference the SDK's Qwen3 is checked against (llama.cpp's snapshot predates Qwen3): written from Hugging Face
transformers' modeling_qwen3.py (Qwen3Attention: q_norm / k_norm, RMSNorms over each head of the projected queries
and keys, before RoPE), and checked against llama.cpp's logits on the architectures both cover (tests/test_gguf.py).

Weights are dequantized once at load with the SDK's own block formats (gguf.py), so a Q4_K_M target trains its
draft against the same numbers it will run with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .gguf import GgufError, GgufReader
from .rope import RopeConfig, apply_rope, rope_angles

SUPPORTED_ARCHS = ("llama", "qwen2", "qwen3", "mistral")


@dataclass
class TargetConfig:
    arch: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    n_ctx_train: int
    norm_eps: float
    rope: RopeConfig

    @staticmethod
    def from_gguf(r: GgufReader) -> "TargetConfig":
        arch = r.require("general.architecture")
        if arch not in SUPPORTED_ARCHS:
            raise GgufError(f"{r.path}: architecture '{arch}' is not supported (supported: {', '.join(SUPPORTED_ARCHS)})")
        a = arch + "."
        n_embd, n_head = int(r.require(a + "embedding_length")), int(r.require(a + "attention.head_count"))
        head_dim = int(r.get(a + "attention.key_length", n_embd // n_head))
        n_head_kv = int(r.get(a + "attention.head_count_kv", n_head))
        rope_dim = int(r.get(a + "rope.dimension_count", head_dim))
        scaling = r.get(a + "rope.scaling.type", "none")
        freq_scale = 1.0
        if scaling == "linear":
            freq_scale = 1.0 / float(r.require(a + "rope.scaling.factor"))
        elif scaling not in ("none", "llama3"):
            raise GgufError(f"{r.path}: rope scaling '{scaling}' is not supported by the trainer")
        factors = None
        if "rope_freqs.weight" in r.tensors:
            factors = tuple(float(v) for v in r.tensor("rope_freqs.weight").reshape(-1))
        token_embd = r.tensors.get("token_embd.weight")
        if token_embd is None:
            raise GgufError(f"{r.path}: tensor 'token_embd.weight' is missing")
        return TargetConfig(
            arch=arch, n_layer=int(r.require(a + "block_count")), n_embd=n_embd, n_ff=int(r.require(a + "feed_forward_length")),
            n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_vocab=int(token_embd.dims[1]),
            n_ctx_train=int(r.get(a + "context_length", 2048)),
            norm_eps=float(r.get(a + "attention.layer_norm_rms_epsilon", 1e-5)),
            rope=RopeConfig(rope_dim=rope_dim, freq_base=float(r.get(a + "rope.freq_base", 10000.0)), freq_scale=freq_scale,
                            neox=(arch in ("qwen2", "qwen3")), freq_factors=factors))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """q [B, L, H, d], k/v [B, S, Hkv, d], mask [B or 1, L, S] bool (True = visible) -> [B, L, H, d].

    Query head h reads KV head h // (H / Hkv), as the runtime does; the query heads of one KV head are stacked
    into one matrix product instead of repeating K/V. Rows that see no key give zeros. Softmax is in float32.
    """
    B, L, H, d = q.shape
    S, Hkv = k.shape[1], k.shape[2]
    g = H // Hkv
    qg = (q * d ** -0.5).transpose(1, 2).reshape(B, Hkv, g * L, d)
    kt = k.permute(0, 2, 3, 1)                       # [B, Hkv, d, S]
    scores = torch.matmul(qg, kt).float().view(B, Hkv, g, L, S)
    # A finite "minus infinity": a row with no visible key stays finite (uniform) and is zeroed below.
    bias = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device).masked_fill_(~mask, -1e30)
    scores += bias.view(mask.shape[0], 1, 1, L, S)
    probs = torch.softmax(scores, dim=-1).to(v.dtype).view(B, Hkv, g * L, S)
    out = torch.matmul(probs, v.transpose(1, 2)).view(B, H, L, d).transpose(1, 2)
    if not bool(mask.any(-1).all()):
        out = out * mask.any(-1).view(mask.shape[0], L, 1, 1).to(out.dtype)
    return out


def causal_mask(L: int, device=None) -> torch.Tensor:
    return torch.ones(L, L, dtype=torch.bool, device=device).tril().unsqueeze(0)


class TargetModel(torch.nn.Module):
    """Frozen target. Parameters are buffers: nothing here is trained."""

    def __init__(self, path: str, dtype: torch.dtype = torch.float32):
        super().__init__()
        with GgufReader(path) as r:
            self.cfg = TargetConfig.from_gguf(r)
            self.path = path

            def t(name: str, optional: bool = False) -> Optional[torch.Tensor]:
                if optional and name not in r.tensors:
                    return None
                return torch.from_numpy(r.tensor(name).copy()).to(dtype)

            self.register_buffer("token_embd", t("token_embd.weight"))          # [V, D]
            out = t("output.weight", optional=True)
            self.tied_output = out is None
            self.register_buffer("output", self.token_embd if out is None else out)  # [V, D]
            self.register_buffer("output_norm", t("output_norm.weight"))
            self._layer_names = []
            for i in range(self.cfg.n_layer):
                p = f"blk.{i}."
                layer = {n: t(p + n + ".weight") for n in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                           "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
                for n in ("attn_q", "attn_k", "attn_v"):
                    layer[n + ".bias"] = t(p + n + ".bias", optional=True)
                for n in ("attn_q_norm", "attn_k_norm"):  # Qwen3: one RMSNorm weight per head size
                    layer[n] = t(p + n + ".weight", optional=True)
                names = {}
                for n, v in layer.items():
                    if v is not None:
                        names[n] = f"l{i}_{n.replace('.', '_')}"
                        self.register_buffer(names[n], v)
                self._layer_names.append(names)
        self.requires_grad_(False)

    def layer(self, i: int) -> dict:
        """Layer i's weights by GGUF name (looked up each time, so .to(device) is honoured)."""
        return {n: getattr(self, b) for n, b in self._layer_names[i].items()}

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.token_embd)

    def lm_head(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.output.t().to(h.dtype)

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, want_logits: bool = True,
                kv_layer: int = -1) -> Tuple[Optional[torch.Tensor], torch.Tensor, torch.Tensor]:
        """tokens/positions [B, L] -> (logits [B, L, V] or None, K [B, L, Hkv, d], V [B, L, Hkv, d]) where K, V are
        layer kv_layer's (default the last) keys after RoPE and values: what the runtime's KV cache holds."""
        c = self.cfg
        B, L = tokens.shape
        angles = rope_angles(positions, c.rope)
        mask = causal_mask(L, tokens.device)
        x = self.embed(tokens)
        kv_layer = kv_layer % c.n_layer
        keep_k = keep_v = None
        for i in range(c.n_layer):
            w = self.layer(i)
            h = rms_norm(x, w["attn_norm"], c.norm_eps)

            def proj(name):
                y = h @ w[name].t()
                b = w.get(name + ".bias")
                return y if b is None else y + b

            q = proj("attn_q").view(B, L, c.n_head, c.head_dim)
            k = proj("attn_k").view(B, L, c.n_head_kv, c.head_dim)
            if "attn_q_norm" in w:  # Qwen3: each head normed over head_dim (modeling_qwen3.py: self.q_norm(...view))
                q = rms_norm(q, w["attn_q_norm"], c.norm_eps)
                k = rms_norm(k, w["attn_k_norm"], c.norm_eps)
            q = apply_rope(q, angles, c.rope)
            k = apply_rope(k, angles, c.rope)
            v = proj("attn_v").view(B, L, c.n_head_kv, c.head_dim)
            if i == kv_layer:
                keep_k, keep_v = k, v
                if not want_logits:  # nothing after this layer's K/V is needed
                    break
            a = attention(q, k, v, mask).reshape(B, L, c.n_head * c.head_dim)
            x = x + a @ w["attn_output"].t()
            h = rms_norm(x, w["ffn_norm"], c.norm_eps)
            x = x + (F.silu(h @ w["ffn_gate"].t()) * (h @ w["ffn_up"].t())) @ w["ffn_down"].t()
        logits = self.lm_head(rms_norm(x, self.output_norm, c.norm_eps)) if want_logits else None
        return logits, keep_k, keep_v
