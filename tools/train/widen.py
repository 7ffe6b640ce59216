#!/usr/bin/env python3
"""Grow a Llama-architecture GGUF model to a larger layer shape without changing what it computes.

Speculative decoding shows its value only when the target is expensive, and the project's trained targets are tiny.
A function-preserving widening gives a model with a real model's cost (the Llama-3.2-1B layer shape: width 2048,
32 query heads over 8 KV heads, FFN 8192, 16 blocks) that still generates the small model's own tokens, so a trained
draft's acceptance stays real while time is that of the large shape:

    python3 tools/train/widen.py ../shared/fixtures/models/code-7m/model.gguf code-7m-1b.gguf --shape llama-3.2-1b

How the outputs stay the same (n = old width, N = new width, r = N / n):
  - every added weight is zero: the embedding and the LM head get zero columns, Q/K/V zero input columns, the attention
    output and the FFN down projection zero output rows, so the residual stream's added dimensions stay 0;
  - RMSNorm divides by the root mean square over all N dimensions, which is the old one over sqrt(r): the norm weights
    are divided by sqrt(r) and epsilon by r, so every norm output is unchanged;
  - query heads keep their KV heads: old query head h of KV group k (position i in it) becomes new head k * g' + i,
    where g' = new heads per KV head (must be at least the old); the added heads have zero Q rows and zero output
    columns: they attend (uniformly) but contribute nothing;
  - added FFN channels have zero gate and up rows (SiLU(0) * 0 = 0) and zero down columns;
  - added blocks (beyond the old count) write nothing to the residual stream: zero attention output and down rows.
The head dimension cannot change (RoPE and the attention scale depend on it). Float sums over the added zeros may
round differently in the last bit, so tokens are equal except at exact near-ties (tests/test_widen.py checks them).
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specula_train.gguf import F16, F32, Q8_0, T_FLOAT32, T_UINT32, GgufReader, GgufWriter  # noqa: E402

# Layer shapes of real models: (width, query heads, KV heads, FFN width, blocks).
SHAPES = {
    "llama-3.2-1b": (2048, 32, 8, 8192, 16),
    "llama-3.2-3b": (3072, 24, 8, 8192, 28),
}


def grow(x: np.ndarray, shape, rows=None, cols=None) -> np.ndarray:
    """x placed in a zero array of `shape`: its rows at `rows` (default: the first ones), its columns at `cols`."""
    out = np.zeros(shape, dtype=np.float32)
    ri = np.arange(x.shape[0]) if rows is None else rows
    if x.ndim == 1:
        out[ri] = x
        return out
    ci = np.arange(x.shape[1]) if cols is None else cols
    out[np.ix_(ri, ci)] = x
    return out


def head_rows(h0: int, kv0: int, n_head: int, n_head_kv: int, hd: int):
    """Where the old heads' rows go: old query head h of KV group k (position i in it) becomes new head k * g' + i,
    g' being the new query heads per KV head; old KV head k stays k. Returns (query rows, KV rows)."""
    g0, g1 = h0 // kv0, n_head // n_head_kv
    head_of = [(h // g0) * g1 + h % g0 for h in range(h0)]
    return np.concatenate([np.arange(hd) + head_of[h] * hd for h in range(h0)]), np.arange(kv0 * hd)


def norm_weight(x: np.ndarray, ratio: float, embd: int) -> np.ndarray:
    """An RMSNorm weight for the wider mean: divided by sqrt(new width / old width), zero on the added channels."""
    return grow(x / math.sqrt(ratio), (embd,))


def widen(src: str, dst: str, embd: int, n_head: int, n_head_kv: int, n_ff: int, n_layer: int, out_type: int) -> dict:
    with GgufReader(src) as r:
        arch = r.require("general.architecture")
        if arch != "llama":
            raise SystemExit(f"{src}: architecture '{arch}': only llama models can be widened")
        p = f"{arch}."
        n0, h0, kv0 = int(r.require(p + "embedding_length")), int(r.require(p + "attention.head_count")), \
            int(r.get(p + "attention.head_count_kv", r.require(p + "attention.head_count")))
        ff0, l0 = int(r.require(p + "feed_forward_length")), int(r.require(p + "block_count"))
        eps0 = float(r.require(p + "attention.layer_norm_rms_epsilon"))
        hd = n0 // h0
        if embd % n_head or embd // n_head != hd:
            raise SystemExit(f"the head dimension must stay {hd}: width {embd} / {n_head} heads is {embd / n_head:g}")
        g0, g1 = h0 // kv0, n_head // n_head_kv if n_head_kv else 0
        checks = [(embd >= n0, "width"), (n_head >= h0, "query heads"), (n_head_kv >= kv0, "KV heads"),
                  (n_head % n_head_kv == 0 and g1 >= g0, "query heads per KV head"), (n_ff >= ff0, "FFN width"),
                  (n_layer >= l0, "blocks")]
        for ok, what in checks:
            if not ok:
                raise SystemExit(f"the new shape has fewer {what} than {src}; widening only grows")
        ratio = embd / n0
        q_rows, kv_rows = head_rows(h0, kv0, n_head, n_head_kv, hd)

        def norm(a: np.ndarray) -> np.ndarray:
            return norm_weight(a, ratio, embd)

        w = GgufWriter(alignment=r.alignment)
        changed = {p + "embedding_length": embd, p + "attention.head_count": n_head, p + "attention.head_count_kv": n_head_kv,
                   p + "feed_forward_length": n_ff, p + "block_count": n_layer}
        w.copy_metadata(r, skip=tuple(changed) + (p + "attention.layer_norm_rms_epsilon", "general.file_type"))
        for key, value in changed.items():
            w.add(key, T_UINT32, value)
        w.add(p + "attention.layer_norm_rms_epsilon", T_FLOAT32, eps0 / ratio)
        w.add("general.file_type", T_UINT32, {F32: 0, F16: 1, Q8_0: 7}[out_type])  # llama_ftype
        w.add_string("widen.source", os.path.basename(src))
        w.add_string("widen.rule", "zero weights, norms / sqrt(r), epsilon / r, heads kept in their KV groups")

        mat = lambda a: F32 if a.ndim < 2 else out_type  # noqa: E731
        for name in r.tensors:
            a = r.tensor(name)
            if name in ("token_embd.weight", "output.weight"):
                b = grow(a, (a.shape[0], embd))
            elif name == "output_norm.weight":
                b = norm(a)
            elif name.startswith("blk."):
                continue
            else:
                raise SystemExit(f"{src}: tensor '{name}' is not one widen knows")
            w.add_tensor(name, b, mat(b))
        for layer in range(n_layer):
            src_layer = layer if layer < l0 else None
            t = (lambda s: r.tensor(f"blk.{src_layer}.{s}")) if src_layer is not None else None
            get = {}
            if t is not None:
                get = {
                    "attn_norm.weight": norm(t("attn_norm.weight")),
                    "ffn_norm.weight": norm(t("ffn_norm.weight")),
                    "attn_q.weight": grow(t("attn_q.weight"), (n_head * hd, embd), rows=q_rows),
                    "attn_k.weight": grow(t("attn_k.weight"), (n_head_kv * hd, embd), rows=kv_rows),
                    "attn_v.weight": grow(t("attn_v.weight"), (n_head_kv * hd, embd), rows=kv_rows),
                    "attn_output.weight": grow(t("attn_output.weight"), (embd, n_head * hd), cols=q_rows),
                    "ffn_gate.weight": grow(t("ffn_gate.weight"), (n_ff, embd)),
                    "ffn_up.weight": grow(t("ffn_up.weight"), (n_ff, embd)),
                    "ffn_down.weight": grow(t("ffn_down.weight"), (embd, n_ff)),
                }
                extra = set(k.split(f"blk.{src_layer}.", 1)[1] for k in r.tensors if k.startswith(f"blk.{src_layer}.")) - set(get)
                if extra:
                    raise SystemExit(f"{src}: block tensors {sorted(extra)} are not ones widen knows")
            else:
                # An added block: it computes (its cost is real) but writes nothing to the residual stream.
                rng = np.random.default_rng(layer)
                small = lambda shape: (rng.standard_normal(shape) * 0.02).astype(np.float32)  # noqa: E731
                get = {
                    "attn_norm.weight": np.ones(embd, np.float32), "ffn_norm.weight": np.ones(embd, np.float32),
                    "attn_q.weight": small((n_head * hd, embd)), "attn_k.weight": small((n_head_kv * hd, embd)),
                    "attn_v.weight": small((n_head_kv * hd, embd)),
                    "attn_output.weight": np.zeros((embd, n_head * hd), np.float32),
                    "ffn_gate.weight": small((n_ff, embd)), "ffn_up.weight": small((n_ff, embd)),
                    "ffn_down.weight": np.zeros((embd, n_ff), np.float32),
                }
            for key in ("attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                        "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"):
                w.add_tensor(f"blk.{layer}.{key}", get[key], mat(get[key]))
        w.write(dst)
    return {"width": (n0, embd), "heads": (h0, n_head), "kv_heads": (kv0, n_head_kv), "ffn": (ff0, n_ff), "blocks": (l0, n_layer)}


def widen_draft(src: str, dst: str, target_src: str, embd: int, n_head: int, n_head_kv: int, n_ff: int, n_layer: int,
                out_type: int) -> None:
    """The LongSpec draft of the target, grown by the same rule: it keeps cross-attending the target's old last block
    (cross_attention.target_layer is unchanged; the added blocks after it write nothing), so it proposes the tokens
    it proposed for the small target."""
    with GgufReader(src) as r, GgufReader(target_src) as t:
        if r.get("general.architecture") != "longspec":
            raise SystemExit(f"{src}: not a LongSpec draft")
        a = "longspec."
        n0, h0, kv0 = int(r.require(a + "embedding_length")), int(r.require(a + "attention.head_count")), \
            int(r.require(a + "attention.head_count_kv"))
        hd = int(r.require(a + "attention.key_length"))
        if int(t.require("llama.embedding_length")) != n0 or int(r.require(a + "target.block_count")) != int(t.require("llama.block_count")):
            raise SystemExit(f"{src} is not a draft for {target_src}")
        if embd // n_head != hd:
            raise SystemExit(f"the draft's head dimension must stay {hd}")
        g0, g1 = h0 // kv0, n_head // n_head_kv
        if n_head < h0 or n_head_kv < kv0 or g1 < g0:
            raise SystemExit("the draft's heads cannot be kept in their KV groups by this shape")
        ratio = embd / n0
        q_rows, kv_rows = head_rows(h0, kv0, n_head, n_head_kv, hd)

        w = GgufWriter(alignment=r.alignment)
        changed = {a + "embedding_length": embd, a + "attention.head_count": n_head, a + "attention.head_count_kv": n_head_kv,
                   a + "feed_forward_length": n_ff, a + "target.block_count": n_layer}
        w.copy_metadata(r, skip=tuple(changed) + (a + "attention.layer_norm_rms_epsilon",))
        for key, value in changed.items():
            w.add(key, T_UINT32, value)
        w.add(a + "attention.layer_norm_rms_epsilon", T_FLOAT32, float(r.require(a + "attention.layer_norm_rms_epsilon")) / ratio)
        w.add_string("widen.source", os.path.basename(src))
        rules = {
            "attn_norm.weight": lambda x: norm_weight(x, ratio, embd),
            "cross_attn_norm.weight": lambda x: norm_weight(x, ratio, embd),
            "ffn_norm.weight": lambda x: norm_weight(x, ratio, embd),
            "attn_q.weight": lambda x: grow(x, (n_head * hd, embd), rows=q_rows),
            "attn_q.bias": lambda x: grow(x, (n_head * hd,), rows=q_rows),
            "attn_k.weight": lambda x: grow(x, (n_head_kv * hd, embd), rows=kv_rows),
            "attn_k.bias": lambda x: grow(x, (n_head_kv * hd,), rows=kv_rows),
            "attn_v.weight": lambda x: grow(x, (n_head_kv * hd, embd), rows=kv_rows),
            "attn_v.bias": lambda x: grow(x, (n_head_kv * hd,), rows=kv_rows),
            "attn_output.weight": lambda x: grow(x, (embd, n_head * hd), cols=q_rows),
            "cross_attn_q.weight": lambda x: grow(x, (n_head * hd, embd), rows=q_rows),
            "cross_attn_q.bias": lambda x: grow(x, (n_head * hd,), rows=q_rows),
            "cross_attn_output.weight": lambda x: grow(x, (embd, n_head * hd), cols=q_rows),
            "ffn_gate.weight": lambda x: grow(x, (n_ff, embd)),
            "ffn_up.weight": lambda x: grow(x, (n_ff, embd)),
            "ffn_down.weight": lambda x: grow(x, (embd, n_ff)),
        }
        for name, info in r.tensors.items():
            key = name.split(".", 2)[2] if name.startswith("blk.") else name
            if key not in rules:
                raise SystemExit(f"{src}: tensor '{name}' is not one widen knows")
            x = rules[key](r.tensor(name))
            w.add_tensor(name, x, F32 if x.ndim < 2 or info.type == F32 else out_type)
        w.write(dst)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--shape", choices=sorted(SHAPES), help="a real model's layer shape")
    ap.add_argument("--embd", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--layers", type=int, help="blocks (default: the shape's)")
    ap.add_argument("--type", choices=("f32", "f16", "q8_0"), default="f16",
                    help="matrix type of the output (default f16; q8_0 as llama-quantize, zero weights stay exactly zero)")
    ap.add_argument("--draft", help="a LongSpec draft of SRC, widened with it into --draft-out")
    ap.add_argument("--draft-out")
    a = ap.parse_args(argv)
    if a.shape:
        embd, heads, kv, ffn, layers = SHAPES[a.shape]
    else:
        if None in (a.embd, a.heads, a.kv_heads, a.ffn):
            ap.error("give --shape, or all of --embd --heads --kv-heads --ffn (and --layers)")
        embd, heads, kv, ffn, layers = a.embd, a.heads, a.kv_heads, a.ffn, a.layers
    layers = a.layers or layers
    if layers is None:
        with GgufReader(a.src) as r:
            layers = int(r.require("llama.block_count"))
    if bool(a.draft) != bool(a.draft_out):
        ap.error("--draft and --draft-out go together")
    out_type = {"f32": F32, "f16": F16, "q8_0": Q8_0}[a.type]
    info = widen(a.src, a.dst, embd, heads, kv, ffn, layers, out_type)
    print(f"{a.dst}: {os.path.getsize(a.dst)} bytes; " + ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in info.items()))
    if a.draft:
        widen_draft(a.draft, a.draft_out, a.src, embd, heads, kv, ffn, layers, out_type)
        print(f"{a.draft_out}: {os.path.getsize(a.draft_out)} bytes")


if __name__ == "__main__":
    main()
