"""GGUF reader/writer: round trips, hostile files, and dequantization against llama.cpp's own numbers."""
import json
import os
import struct

import numpy as np
import pytest
import torch

from conftest import REPO, model_path, reference_path
from specula_train.gguf import BF16, F16, F32, GgufError, GgufReader, GgufWriter, T_ARRAY, T_INT32, T_STRING
from specula_train.target import TargetModel


def test_round_trip_metadata_and_tensors(tmp_path):
    rng = np.random.default_rng(0)
    w = GgufWriter()
    w.add_string("general.architecture", "longspec")
    w.add_u32("a.u32", 7)
    w.add_f32("a.f32", 0.25)
    w.add("a.strings", T_ARRAY, ["x", "yz", ""], T_STRING)
    w.add("a.ints", T_ARRAY, [1, -2, 3], T_INT32)
    m = rng.standard_normal((5, 64)).astype(np.float32)
    w.add_tensor("m32", m, F32)
    w.add_tensor("m16", m, F16)
    w.add_tensor("mbf", m, BF16)
    w.add_tensor("v", np.arange(3, dtype=np.float32), F32)
    path = str(tmp_path / "t.gguf")
    w.write(path)
    with GgufReader(path) as r:
        assert r.metadata["general.architecture"] == "longspec"
        assert r.metadata["a.u32"] == 7 and r.metadata["a.f32"] == 0.25
        assert r.metadata["a.strings"] == ["x", "yz", ""] and r.metadata["a.ints"] == [1, -2, 3]
        assert r.tensors["m32"].dims == (64, 5)  # ggml order
        np.testing.assert_array_equal(r.tensor("m32"), m)
        np.testing.assert_array_equal(r.tensor("m16"), m.astype(np.float16).astype(np.float32))
        np.testing.assert_allclose(r.tensor("mbf"), m, rtol=2 ** -8)
        np.testing.assert_array_equal(r.tensor("v"), [0, 1, 2])
        # copying a whole file's metadata reproduces it
        w2 = GgufWriter()
        w2.copy_metadata(r)
        w2.write(str(tmp_path / "copy.gguf"))
    with GgufReader(str(tmp_path / "copy.gguf")) as r2:
        assert {k: v for k, v in r2.metadata.items()} == {k: v for k, v in GgufReader(path).metadata.items()}


def test_hostile_files_raise_clear_errors(tmp_path):
    good = model_path("stories260K.gguf")
    data = open(good, "rb").read()
    cases = {
        "magic": b"GGUX" + data[4:],
        "version": data[:4] + struct.pack("<I", 99) + data[8:],
        "truncated_header": data[:40],
        "truncated_data": data[:len(data) // 2],
        "huge_counts": data[:8] + struct.pack("<QQ", 1 << 40, 1 << 40) + data[24:],
    }
    for name, blob in cases.items():
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(blob)
        with pytest.raises(GgufError):
            GgufReader(str(p))


def _reference_check(model: str, ref_json: str, rel_tol: float, min_token_match: float):
    ref = json.load(open(ref_json))
    target = TargetModel(model)
    ids = list(ref["prompt_ids"]) + [s["token"] for s in ref["steps"]]
    tokens = torch.tensor([ids])
    with torch.no_grad():
        logits, _, _ = target(tokens, torch.arange(len(ids))[None])
    n_prompt = len(ref["prompt_ids"])
    matches, worst = 0, 0.0
    for i, step in enumerate(ref["steps"]):
        row = logits[0, n_prompt - 1 + i]
        matches += int(row.argmax()) == step["token"]
        scale = max(abs(v) for _, v in step["top"])
        for tok, val in step["top"]:
            worst = max(worst, abs(float(row[tok]) - val) / scale)
    assert matches >= min_token_match * len(ref["steps"]), f"{matches}/{len(ref['steps'])} greedy tokens"
    assert worst <= rel_tol, f"worst top-5 logit error {worst:.2e} (relative to the largest)"
    return matches, worst


@pytest.mark.parametrize("model,ref", [
    ("code-7m/model.gguf", "code7m_short.json"),
    ("stories260K.gguf", "stories260K_lily.json"),
    ("synth-qwen2-bias-f32.gguf", "synth-qwen2-bias-f32/a.json"),  # NEOX RoPE, q/k/v biases
    ("synth-llama-gqa-f16.gguf", "synth-llama-gqa-f16/a.json"),    # F16, grouped-query attention
])
def test_target_forward_reproduces_llama_cpp_float_models(model, ref):
    # F32/F16 weights: llama.cpp's logits to 1e-3 relative (the fixtures' README tolerance), every greedy token.
    _reference_check(model_path(model), reference_path(ref), 1e-3, 1.0)


@pytest.mark.parametrize("name", ["q8_0", "q4_0", "q4_k_m"])
def test_dequantized_targets_reproduce_llama_cpp(name):
    # Quantized weights (Q8_0, Q4_0, Q4_K + Q6_K): llama.cpp also quantizes activations to Q8 for its dot
    # products and the trainer does not, so near-ties may flip; a wrong block layout would miss by far more.
    _reference_check(model_path(f"synth-llama-{name}.gguf"), reference_path(f"synth-llama-{name}/a.json"),
                     3e-2, 0.9)


@pytest.mark.parametrize("ref", ["mixtral-tiny-f32-a.json", "mixtral-tiny-f32-b.json", "qwen2moe-tiny-f32-a.json",
                                 "qwen2moe-tiny-f32-b.json", "mixtral-tiny-f16-a.json", "qwen2moe-tiny-f16-a.json",
                                 "starcoder2-tiny-f32-a.json", "starcoder2-tiny-f32-b.json", "starcoder2-tiny-f16-a.json"])
def test_target_reproduces_llama_cpp_on_synthetic_references(sdk, tmp_path, ref):
    # The torch MoE block (the reference of qwen3moe, which llama.cpp's snapshot predates) and StarCoder2 against
    # llama.cpp 2025-02-20 itself: the in-repo references of synthetic Mixtral and qwen2moe
    # models, written again here byte for byte from the reference's shape, type, seed and layer count.
    ref_path = os.path.join(REPO, "tests", "api", "data", "llama_cpp", ref)
    synth = json.load(open(ref_path))["synthetic"]
    path = str(tmp_path / "moe.gguf")
    sdk.write_synthetic_model(synth["shape"], os.path.join(REPO, "models", "stories260K.gguf"), path, synth["type"],
                              seed=synth["seed"], n_layer=synth["n_layer"])
    _reference_check(path, ref_path, 1e-3, 1.0)
