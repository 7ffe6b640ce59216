#!/usr/bin/env python3
"""Writes the seed corpus of the gguf_model fuzz target (tests/fuzz/corpus/gguf_model): small but complete GGUF
models that the library loads (tiny shapes, a few KiB to ~40 KiB each), built with the trainer's GGUF writer
(tools/train/specula_train/gguf.py) from the bundled models/stories260K.gguf's tokenizer or a synthetic one.

    /usr/bin/python3 tests/fuzz/make_gguf_seeds.py   (needs numpy: Debian's python3-numpy)

Re-running rewrites the same files (fixed seeds)."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))

import numpy as np  # noqa: E402
from specula_train import gguf  # noqa: E402

OUT = os.path.join(HERE, "corpus", "gguf_model")
rng = np.random.default_rng(1)


def spm_tokenizer(w):
    """stories260K's SentencePiece vocabulary (512 tokens)."""
    with gguf.GgufReader(os.path.join(ROOT, "models", "stories260K.gguf")) as r:
        for key, value in r.metadata.items():
            if key.startswith("tokenizer."):
                vtype, etype = r.metadata_types[key]
                w.add(key, vtype, value, etype)
        return len(r.get("tokenizer.ggml.tokens"))


def bpe_tokenizer(w, pre="gpt-2", extra=()):
    """A byte-level BPE vocabulary: the 256 GPT-2 byte characters, a few merges, control tokens."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_chars = [chr(c) for c in cs]
    tokens = byte_chars[:]
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s"]
    for m in merges:
        tokens.append(m.replace(" ", ""))
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + list(extra)
    tokens += specials
    types = [1] * (len(tokens) - len(specials)) + [3] * len(specials)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", pre)
    w.add("tokenizer.ggml.tokens", gguf.T_ARRAY, tokens, gguf.T_STRING)
    w.add("tokenizer.ggml.token_type", gguf.T_ARRAY, types, gguf.T_INT32)
    w.add("tokenizer.ggml.merges", gguf.T_ARRAY, merges, gguf.T_STRING)
    w.add_u32("tokenizer.ggml.eos_token_id", tokens.index("<|endoftext|>"))
    w.add_u32("tokenizer.ggml.bos_token_id", tokens.index("<|endoftext|>"))
    w.add("tokenizer.ggml.add_bos_token", gguf.T_BOOL, False)
    return len(tokens)


def model(name, arch="llama", n_embd=8, n_head=2, n_head_kv=1, n_ff=16, n_layer=1, tokenizer=spm_tokenizer,
          wtype=gguf.F16, tied=False, bias=False, extra_meta=None):
    w = gguf.GgufWriter()
    w.add_string("general.architecture", arch)
    w.add_string("general.name", "fuzz-seed-" + name)
    n_vocab = tokenizer(w)
    a = arch + "."
    w.add_u32(a + "context_length", 128)
    w.add_u32(a + "embedding_length", n_embd)
    w.add_u32(a + "block_count", n_layer)
    w.add_u32(a + "feed_forward_length", n_ff)
    w.add_u32(a + "attention.head_count", n_head)
    w.add_u32(a + "attention.head_count_kv", n_head_kv)
    w.add_u32(a + "rope.dimension_count", n_embd // n_head)
    w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-5)
    w.add_f32(a + "rope.freq_base", 10000.0)
    for key, (vtype, value) in (extra_meta or {}).items():
        w.add(key, vtype, value)
    hd = n_embd // n_head
    mat = lambda rows, cols: (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd), wtype)
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    if not tied:
        w.add_tensor("output.weight", mat(n_vocab, n_embd), wtype)
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "attn_q.weight", mat(n_head * hd, n_embd), wtype)
        w.add_tensor(p + "attn_k.weight", mat(n_head_kv * hd, n_embd), wtype)
        w.add_tensor(p + "attn_v.weight", mat(n_head_kv * hd, n_embd), wtype)
        if bias:
            w.add_tensor(p + "attn_q.bias", np.zeros(n_head * hd, np.float32))
            w.add_tensor(p + "attn_k.bias", np.zeros(n_head_kv * hd, np.float32))
            w.add_tensor(p + "attn_v.bias", np.zeros(n_head_kv * hd, np.float32))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, n_head * hd), wtype)
        w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "ffn_gate.weight", mat(n_ff, n_embd), wtype)
        w.add_tensor(p + "ffn_up.weight", mat(n_ff, n_embd), wtype)
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, n_ff), wtype)
    w.alignment = 32
    w.write(os.path.join(OUT, name + ".gguf"))


def vocab_only(name, tokenizer):
    w = gguf.GgufWriter()
    w.add_string("general.architecture", "llama")
    tokenizer(w)
    w.write(os.path.join(OUT, name + ".gguf"))


def main():
    os.makedirs(OUT, exist_ok=True)
    model("llama-spm-f16")
    model("llama-spm-f32-2layer", wtype=gguf.F32, n_layer=2, n_head=1, n_head_kv=1)
    model("llama-spm-q8_0", n_embd=32, n_head=4, n_head_kv=2, n_ff=32, wtype=gguf.Q8_0, tied=True)
    model("llama-bpe-bf16", tokenizer=lambda w: bpe_tokenizer(w, "llama-bpe"), wtype=gguf.BF16)
    model("qwen2-bias-tied", arch="qwen2", tokenizer=lambda w: bpe_tokenizer(w, "qwen2"), bias=True, tied=True)
    model("llama-rope-scaling", extra_meta={"llama.rope.scaling.type": (gguf.T_STRING, "linear"),
                                            "llama.rope.scaling.factor": (gguf.T_FLOAT32, 2.0)})
    vocab_only("vocab-only-spm", spm_tokenizer)
    vocab_only("vocab-only-gpt2", lambda w: bpe_tokenizer(w, "gpt-2"))
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == "__main__":
    main()
