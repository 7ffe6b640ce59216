"""The frozen target model in torch, read from its GGUF: the straight Llama / Qwen2 / Qwen3 / Gemma 2 / Gemma 3 /
Phi-3 forward pass, returning what draft training needs (the last layer's post-RoPE keys and values, and the logits).
It is also the independent reference the SDK's Qwen3, Gemma 3 and Phi-4-mini's partial rotation are checked against
(llama.cpp's snapshot predates them): written from Hugging Face transformers' modeling_qwen3.py (Qwen3Attention:
q_norm / k_norm, RMSNorms over each head of the projected queries and keys, before RoPE), modeling_gemma3.py
(Gemma3TextScaledWordEmbedding's sqrt(hidden_size), Gemma3RMSNorm's (1 + w), which GGUF stores with the 1 added,
pre- and post-norms around attention and MLP,
gelu_pytorch_tanh, query_pre_attn_scalar, sliding layers where (i + 1) % 6 != 0 with rope_local_base_freq 10000 and
keys q - k < sliding_window), modeling_gemma2.py (the same blocks without Q/K norms, sliding layers where i % 2 == 0
with one RoPE, attn_logit_softcapping on the scaled scores, final_logit_softcapping on the logits) and
modeling_phi3.py (qkv_proj split into Q, K, V and gate_up_proj into gate and up by rows; partial_rotary_factor: RoPE
on the first rotary_ndims dimensions of each head, rotate_half pairs; LongRoPE's short_factor / long_factor divide
the inverse frequencies and attention_factor scales cos and sin; every layer sliding), modeling_qwen3_moe.py
(Qwen3MoeSparseMoeBlock: the router's softmax in float32 over all experts, torch.topk, norm_topk_prob dividing the
top weights by their sum, each expert's SwiGLU MLP, weighted and summed), which modeling_mixtral.py's block is too,
and modeling_qwen2_moe.py (no renormalization; a shared expert scaled by sigmoid(shared_expert_gate)),
modeling_starcoder2.py (nn.LayerNorm with bias before attention, before the MLP and at the end; biases on q/k/v/o
and on the MLP's c_fc and c_proj; gelu_pytorch_tanh without a gate: here with ggml's CPU roundings of its input and
result to F16, which llama.cpp and the SDK apply, so that a draft trains on the numbers it will run with), and checked
against llama.cpp's logits on the architectures both cover (tests/test_gguf.py).

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

SUPPORTED_ARCHS = ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "mistral", "qwen2moe", "qwen3moe", "starcoder2")


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
    sliding_window: int = 0                  # gemma3: the local layers' window (0: none)
    rope_local: Optional[RopeConfig] = None  # gemma3: the local layers' RoPE
    query_scale: Optional[float] = None      # softmax scale; None: head_dim ** -0.5
    attn_softcap: float = 0.0                # gemma2: scores -> cap * tanh(scores / cap)
    final_softcap: float = 0.0               # gemma2: logits -> cap * tanh(logits / cap)
    n_expert: int = 0                        # mixture of experts (Mixtral, qwen2moe, qwen3moe): experts per layer
    n_expert_used: int = 0                   # experts a token runs (transformers' num_experts_per_tok)
    norm_topk_prob: bool = False             # the top experts' weights renormalized to sum 1 (not qwen2moe)

    def is_sliding(self, i: int) -> bool:
        if self.sliding_window <= 0:
            return False
        if self.arch == "phi3":
            return True
        return i % 2 == 0 if self.arch == "gemma2" else (i + 1) % 6 != 0

    @staticmethod
    def from_gguf(r: GgufReader, n_ctx: Optional[int] = None) -> "TargetConfig":
        """n_ctx: the context of the sessions this target serves (phi3's LongRoPE factors depend on it, as the SDK
        chooses them: the long ones past rope.scaling.original_context_length); None: the short ones."""
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
        n_layer = int(r.require(a + "block_count"))
        neox = arch in ("qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen2moe", "qwen3moe", "starcoder2")
        extra = {}
        n_expert = int(r.get(a + "expert_count", 0))
        if n_expert > 0:
            extra_moe = dict(n_expert=n_expert, n_expert_used=int(r.require(a + "expert_used_count")), norm_topk_prob=arch != "qwen2moe")
        else:
            extra_moe = {}
        attn_factor = float(r.get(a + "rope.scaling.attn_factor", 1.0))
        if arch == "phi3":
            extra = dict(sliding_window=int(r.get(a + "attention.sliding_window", 0)))
            original = int(r.get(a + "rope.scaling.original_context_length", r.get(a + "context_length", 2048)))
            which = "long" if n_ctx is not None and n_ctx > original else "short"
            if f"rope_factors_{which}.weight" in r.tensors:  # transformers' long_factor / short_factor
                factors = tuple(float(v) for v in r.tensor(f"rope_factors_{which}.weight").reshape(-1)[:rope_dim // 2])
        if arch == "gemma2":
            extra = dict(sliding_window=int(r.get(a + "attention.sliding_window", 4096)),
                         query_scale=float(n_embd // n_head if n_layer == 46 else head_dim) ** -0.5,
                         attn_softcap=float(r.get(a + "attn_logit_softcapping", 50.0)),
                         final_softcap=float(r.get(a + "final_logit_softcapping", 30.0)))
        if arch == "gemma3":
            # query_pre_attn_scalar: head_dim in every Gemma 3 config but the 27B's (62 layers: hidden / heads).
            extra = dict(sliding_window=int(r.require(a + "attention.sliding_window")),
                         rope_local=RopeConfig(rope_dim=rope_dim, freq_base=10000.0, neox=True),
                         query_scale=float(n_embd // n_head if n_layer == 62 else head_dim) ** -0.5)
        return TargetConfig(
            arch=arch, n_layer=n_layer, n_embd=n_embd, n_ff=int(r.require(a + "feed_forward_length")),
            n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_vocab=int(token_embd.dims[1]),
            n_ctx_train=int(r.get(a + "context_length", 2048)),
            norm_eps=float(r.get(a + ("attention.layer_norm_epsilon" if arch == "starcoder2" else "attention.layer_norm_rms_epsilon"), 1e-5)),
            rope=RopeConfig(rope_dim=rope_dim, freq_base=float(r.get(a + "rope.freq_base", 10000.0)), freq_scale=freq_scale,
                            neox=neox, freq_factors=factors, attn_factor=attn_factor), **extra, **extra_moe)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """nn.LayerNorm over the last dimension in float32 (StarCoder2)."""
    return F.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), eps).to(x.dtype)


def gelu_ggml(x: torch.Tensor) -> torch.Tensor:
    """gelu_pytorch_tanh as ggml's CPU computes it (GGML_GELU_FP16): the input and the result rounded to F16, 0 at or
    below -10 and x at or above 10."""
    y = F.gelu(x.half().float(), approximate="tanh").half().float()
    return torch.where(x <= -10, torch.zeros_like(x), torch.where(x >= 10, x, y)).to(x.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: Optional[float] = None,
              softcap: float = 0.0) -> torch.Tensor:
    """q [B, L, H, d], k/v [B, S, Hkv, d], mask [B or 1, L, S] bool (True = visible) -> [B, L, H, d].

    Query head h reads KV head h // (H / Hkv), as the runtime does; the query heads of one KV head are stacked
    into one matrix product instead of repeating K/V. Rows that see no key give zeros. Softmax is in float32.
    """
    B, L, H, d = q.shape
    S, Hkv = k.shape[1], k.shape[2]
    g = H // Hkv
    qg = (q * (d ** -0.5 if scale is None else scale)).transpose(1, 2).reshape(B, Hkv, g * L, d)
    kt = k.permute(0, 2, 3, 1)                       # [B, Hkv, d, S]
    scores = torch.matmul(qg, kt).float().view(B, Hkv, g, L, S)
    if softcap > 0:  # Gemma 2: attn_weights / softcap, tanh, * softcap (before the mask)
        scores = torch.tanh(scores / softcap) * softcap
    # A finite "minus infinity": a row with no visible key stays finite (uniform) and is zeroed below.
    bias = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device).masked_fill_(~mask, -1e30)
    scores += bias.view(mask.shape[0], 1, 1, L, S)
    probs = torch.softmax(scores, dim=-1).to(v.dtype).view(B, Hkv, g * L, S)
    out = torch.matmul(probs, v.transpose(1, 2)).view(B, H, L, d).transpose(1, 2)
    if not bool(mask.any(-1).all()):
        out = out * mask.any(-1).view(mask.shape[0], L, 1, 1).to(out.dtype)
    return out


def causal_mask(L: int, device=None, window: int = 0) -> torch.Tensor:
    """[1, L, L]: row q sees k <= q, and with a window only q - k < window."""
    mask = torch.ones(L, L, dtype=torch.bool, device=device).tril()
    if window > 0:
        mask &= ~torch.ones(L, L, dtype=torch.bool, device=device).tril(diagonal=-window)
    return mask.unsqueeze(0)


class TargetModel(torch.nn.Module):
    """Frozen target. Parameters are buffers: nothing here is trained."""

    def __init__(self, path: str, dtype: torch.dtype = torch.float32, n_ctx: Optional[int] = None):
        super().__init__()
        with GgufReader(path) as r:
            self.cfg = TargetConfig.from_gguf(r, n_ctx)
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
            self.register_buffer("output_norm_b", t("output_norm.bias", optional=True))  # starcoder2's final LayerNorm
            self._layer_names = []
            for i in range(self.cfg.n_layer):
                p = f"blk.{i}."
                fused = p + "attn_qkv.weight" in r.tensors  # phi3: qkv_proj and gate_up_proj, split by rows
                moe = self.cfg.n_expert > 0
                names = ("attn_norm", "attn_output", "ffn_norm") + (() if moe else ("ffn_down",)) + (() if fused else ("attn_q", "attn_k", "attn_v"))
                names += () if fused or moe else ("ffn_up",) if self.cfg.arch == "starcoder2" else ("ffn_gate", "ffn_up")
                if moe:  # the router [E, D], stacked experts [E, F, D] / [E, D, F]; qwen2moe's shared expert
                    names += ("ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")
                    if p + "ffn_gate_inp_shexp.weight" in r.tensors:
                        names += ("ffn_gate_inp_shexp", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp")
                layer = {n: t(p + n + ".weight") for n in names}
                if fused:
                    q_rows, kv_rows = self.cfg.n_head * self.cfg.head_dim, self.cfg.n_head_kv * self.cfg.head_dim
                    layer["attn_q"], layer["attn_k"], layer["attn_v"] = torch.split(t(p + "attn_qkv.weight"), [q_rows, kv_rows, kv_rows])
                    layer["ffn_gate"], layer["ffn_up"] = torch.split(t(p + "ffn_up.weight"), [self.cfg.n_ff, self.cfg.n_ff])
                for n in ("attn_q", "attn_k", "attn_v", "attn_output", "attn_norm", "ffn_norm", "ffn_up", "ffn_down"):
                    layer[n + ".bias"] = t(p + n + ".bias", optional=True)  # qwen2's q/k/v; starcoder2's all
                for n in ("attn_q_norm", "attn_k_norm"):  # Qwen3, Gemma 3: one RMSNorm weight per head size
                    layer[n] = t(p + n + ".weight", optional=True)
                for n in ("post_attention_norm", "post_ffw_norm"):  # Gemma: norms of the blocks' outputs
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

    def moe(self, h: torch.Tensor, w: dict) -> torch.Tensor:
        """The sparse MoE block (Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock) on
        h [B, L, D]: softmax over the router's logits in float32, the top n_expert_used, renormalized unless qwen2moe,
        each chosen expert's SwiGLU MLP weighted by its probability and summed; qwen2moe adds its shared expert
        times sigmoid(shared_expert_gate(h))."""
        c = self.cfg
        x = h.reshape(-1, h.shape[-1])
        probs = F.softmax((x @ w["ffn_gate_inp"].t()).float(), dim=-1)
        weights, chosen = torch.topk(probs, c.n_expert_used, dim=-1)
        if c.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        out = torch.zeros_like(x)
        for e in range(c.n_expert):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            xe = x[rows]
            ye = (F.silu(xe @ w["ffn_gate_exps"][e].t()) * (xe @ w["ffn_up_exps"][e].t())) @ w["ffn_down_exps"][e].t()
            out.index_add_(0, rows, ye * weights[rows, slot, None])
        if "ffn_gate_inp_shexp" in w:
            shared = (F.silu(x @ w["ffn_gate_shexp"].t()) * (x @ w["ffn_up_shexp"].t())) @ w["ffn_down_shexp"].t()
            out = out + torch.sigmoid(x @ w["ffn_gate_inp_shexp"].reshape(-1, 1)) * shared
        return out.view(h.shape)

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, want_logits: bool = True,
                kv_layer: int = -1) -> Tuple[Optional[torch.Tensor], torch.Tensor, torch.Tensor]:
        """tokens/positions [B, L] -> (logits [B, L, V] or None, K [B, L, Hkv, d], V [B, L, Hkv, d]) where K, V are
        layer kv_layer's (default the last) keys after RoPE and values: what the runtime's KV cache holds."""
        c = self.cfg
        B, L = tokens.shape
        angles = rope_angles(positions, c.rope)
        mask = causal_mask(L, tokens.device)
        angles_local = rope_angles(positions, c.rope_local) if c.rope_local is not None else None
        mask_local = causal_mask(L, tokens.device, c.sliding_window) if c.sliding_window > 0 else None
        x = self.embed(tokens)
        if c.arch in ("gemma2", "gemma3"):  # embeddings times sqrt(hidden_size)
            x = x * torch.tensor(c.n_embd ** 0.5, dtype=x.dtype)
        kv_layer = kv_layer % c.n_layer
        keep_k = keep_v = None
        for i in range(c.n_layer):
            w = self.layer(i)
            norm = (lambda v, n: layer_norm(v, w[n], w[n + ".bias"], c.norm_eps)) if c.arch == "starcoder2" else \
                (lambda v, n: rms_norm(v, w[n], c.norm_eps))
            h = norm(x, "attn_norm")

            def proj(name):
                y = h @ w[name].t()
                b = w.get(name + ".bias")
                return y if b is None else y + b

            q = proj("attn_q").view(B, L, c.n_head, c.head_dim)
            k = proj("attn_k").view(B, L, c.n_head_kv, c.head_dim)
            if "attn_q_norm" in w:  # Qwen3: each head normed over head_dim (modeling_qwen3.py: self.q_norm(...view))
                q = rms_norm(q, w["attn_q_norm"], c.norm_eps)
                k = rms_norm(k, w["attn_k_norm"], c.norm_eps)
            sliding = c.is_sliding(i)
            rope_cfg, rope_ang = (c.rope_local, angles_local) if sliding and c.rope_local is not None else (c.rope, angles)
            q = apply_rope(q, rope_ang, rope_cfg)
            k = apply_rope(k, rope_ang, rope_cfg)
            v = proj("attn_v").view(B, L, c.n_head_kv, c.head_dim)
            if i == kv_layer:
                keep_k, keep_v = k, v
                if not want_logits:  # nothing after this layer's K/V is needed
                    break
            a = attention(q, k, v, mask_local if sliding else mask, c.query_scale, c.attn_softcap).reshape(B, L, c.n_head * c.head_dim)
            a = a @ w["attn_output"].t()
            if "attn_output.bias" in w:
                a = a + w["attn_output.bias"]
            if "post_attention_norm" in w:
                a = rms_norm(a, w["post_attention_norm"], c.norm_eps)
            x = x + a
            h = norm(x, "ffn_norm")
            if c.arch == "starcoder2":  # c_fc, GELU, c_proj, with biases
                f = gelu_ggml(h @ w["ffn_up"].t() + w["ffn_up.bias"]) @ w["ffn_down"].t() + w["ffn_down.bias"]
            elif c.n_expert > 0:
                f = self.moe(h, w)
            elif c.arch in ("gemma2", "gemma3"):  # gelu_pytorch_tanh
                f = (F.gelu(h @ w["ffn_gate"].t(), approximate="tanh") * (h @ w["ffn_up"].t())) @ w["ffn_down"].t()
            else:
                f = (F.silu(h @ w["ffn_gate"].t()) * (h @ w["ffn_up"].t())) @ w["ffn_down"].t()
            if "post_ffw_norm" in w:
                f = rms_norm(f, w["post_ffw_norm"], c.norm_eps)
            x = x + f
        final = layer_norm(x, self.output_norm, self.output_norm_b, c.norm_eps) if c.arch == "starcoder2" else rms_norm(x, self.output_norm, c.norm_eps)
        logits = self.lm_head(final) if want_logits else None
        if logits is not None and c.final_softcap > 0:  # Gemma 2's final_logit_softcapping
            logits = torch.tanh(logits / c.final_softcap) * c.final_softcap
        return logits, keep_k, keep_v
