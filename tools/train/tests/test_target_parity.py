"""The SDK's Qwen3, Gemma 3, Gemma 2, Phi-4-mini's shape and the mixtures of experts (qwen3moe, Mixtral, qwen2moe) against an independent reference: the torch forward pass of target.py, written
from Hugging Face transformers' modeling files. llama.cpp's snapshot (2025-02-20), the reference of the other
architectures (tests/api/test_parity.cpp), predates Qwen3 and Gemma 3; target.py itself reproduces llama.cpp's logits on the architectures both
cover (test_gguf.py).

On synthetic models of each graph (tiny-qwen3: 4 heads of 128 over a width of 256, 2 KV heads, per-head query and
key norms whose weights vary around 1, tied head, NEOX RoPE at base 1e6; tiny-gemma3 and tiny-gemma2 below), written at test time with the bundled
tokenizer, for every weight type synthetic models are made of: greedy tokens and the top-5 logits at every position.
"""
import os

import numpy as np
import pytest
import torch

from conftest import REPO
from specula_train.target import TargetModel

# F32: against the reference in float64 (check_against_reference), the arithmetic exact. F16: ggml's F16 dot
# products round the activations to F16.
# Quantized: the SDK (as llama.cpp) multiplies quantized weights with activations quantized to 8 bits, the reference
# with float activations; near-ties may flip, a wrong layout would miss by far more.
CASES = [("f32", 1e-4, 1.0), ("f16", 5e-3, 1.0), ("q8_0", 3e-2, 0.9), ("q4_0", 5e-2, 0.9), ("q4_k_m", 5e-2, 0.9)]


def check_against_reference(sdk, tmp_path, shape, weight_type, seed, rel_tol, min_match, n_ctx=128):
    """A synthetic model of `shape` in `weight_type`, written with the bundled tokenizer: the SDK's logits at 48
    positions in a session of n_ctx positions against the torch reference's, by greedy token and by the top-5
    logits."""
    path = str(tmp_path / f"{shape}-{weight_type}.gguf")
    sdk.write_synthetic_model(shape, os.path.join(REPO, "models", "stories260K.gguf"), path, weight_type)
    model = sdk.Model(path)
    session = sdk.TargetSession(model, n_ctx=n_ctx)
    rng = np.random.default_rng(seed)
    ids = [model.bos] + rng.integers(3, model.n_vocab, 47).tolist()
    ours = session.logits_after(ids)
    # F32 weights: the reference in float64, the arithmetic's exact value. A float32 reference rounds too, and where
    # an activation is rounded to F16 (StarCoder2's GELU, as ggml's) its error can exceed the SDK's: on tiny-starcoder2
    # with torch's AVX2 kernels (a CPU without AVX-512), torch float32 was 1.2e-4 from float64 and the SDK 4.4e-5.
    dtype = torch.float64 if weight_type == "f32" else torch.float32
    with torch.no_grad():
        ref, _, _ = TargetModel(path, dtype=dtype, n_ctx=n_ctx)(torch.tensor([ids]), torch.arange(len(ids))[None])
    ref = ref[0].double().numpy()
    matches, worst = 0, 0.0
    for i in range(len(ids)):
        top = np.argsort(-ref[i], kind="stable")[:5]
        scale = np.abs(ref[i][top]).max()
        worst = max(worst, float(np.abs(ours[i][top] - ref[i][top]).max() / scale))
        matches += int(np.argmax(ours[i]) == np.argmax(ref[i]))
    session.close()
    model.close()
    print(f"{shape} {weight_type} n_ctx {n_ctx}: {matches}/{len(ids)} greedy, worst top-5 error {worst:.2e}")
    assert matches >= min_match * len(ids), f"{weight_type}: {matches}/{len(ids)} greedy tokens agree"
    assert worst <= rel_tol, f"{weight_type}: worst top-5 logit error {worst:.2e} (relative to the largest)"


@pytest.mark.parametrize("weight_type,rel_tol,min_match", CASES)
def test_qwen3_logits_match_the_torch_reference(sdk, tmp_path, weight_type, rel_tol, min_match):
    check_against_reference(sdk, tmp_path, "tiny-qwen3", weight_type, 3, rel_tol, min_match)


@pytest.mark.parametrize("weight_type,rel_tol,min_match", CASES)
def test_gemma3_logits_match_the_torch_reference(sdk, tmp_path, weight_type, rel_tol, min_match):
    """Gemma 3 (llama.cpp's snapshot predates it too) on tiny-gemma3: 8 layers, 5 local with a window of 16 positions
    and RoPE base 1e4, then a global one (base 1e6, linear scaling x8), then 2 local; 48 positions cross the window
    three times. Post-norm weights vary around 1, so the reference sees them."""
    check_against_reference(sdk, tmp_path, "tiny-gemma3", weight_type, 5, rel_tol, min_match)


@pytest.mark.parametrize("weight_type,rel_tol,min_match", CASES)
def test_gemma2_logits_match_the_torch_reference(sdk, tmp_path, weight_type, rel_tol, min_match):
    """Gemma 2 on tiny-gemma2: 4 layers alternating local (a window of 16) and global, scores soft-capped at 0.15 and
    logits at 0.5 (small enough that random weights reach tanh's bend). llama.cpp 2025-02-20 runs Gemma 2 too: the
    torch reference is itself checked against llama.cpp on llama/qwen2 (test_gguf.py)."""
    check_against_reference(sdk, tmp_path, "tiny-gemma2", weight_type, 6, rel_tol, min_match)


@pytest.mark.parametrize("weight_type,rel_tol,min_match", CASES)
def test_phi3_logits_match_the_torch_reference(sdk, tmp_path, weight_type, rel_tol, min_match):
    """Phi-4-mini's variations on tiny-phi4 (newer than llama.cpp's snapshot, which checks tiny-phi3's other phi3
    features in tests/api/test_parity.cpp): RoPE on 48 of each head's 64 dimensions, fused Q/K/V and gate/up
    matrices, a tied head, LongRoPE's short factors in a session of 128 positions and its long ones in one of 1024
    (past the 512 they are for), both with the attention factor."""
    for n_ctx in (128, 1024):
        check_against_reference(sdk, tmp_path, "tiny-phi4", weight_type, 7, rel_tol, min_match, n_ctx)


# With experts, the 8-bit activations of quantized weights also move the routers' logits: a row whose k-th and next
# expert are near-tied may run another expert in one engine than in the other (as a near-tied greedy token flips),
# which moves its logits by more than the dense models' 3e-2 (measured: up to 3.7e-2 on tiny-qwen2moe Q8_0). F32 and
# F16 are the arithmetic's check (measured within 1.2e-6 for all three).
MOE_CASES = [("f32", 1e-4, 1.0), ("f16", 5e-3, 1.0), ("q8_0", 5e-2, 0.9), ("q4_0", 5e-2, 0.9), ("q4_k_m", 5e-2, 0.9)]


@pytest.mark.parametrize("weight_type,rel_tol,min_match", MOE_CASES)
@pytest.mark.parametrize("shape", ["tiny-qwen3moe", "tiny-mixtral", "tiny-qwen2moe"])
def test_moe_logits_match_the_torch_reference(sdk, tmp_path, shape, weight_type, rel_tol, min_match):
    """Mixtures of experts: qwen3moe (newer than llama.cpp's snapshot: this is its reference) on tiny-qwen3moe, 16
    experts of which 4 run a token, renormalized, per-head norms; Mixtral (tiny-mixtral: 8 experts, 2 a token) and
    qwen2moe (tiny-qwen2moe: 6 experts, 2 a token, not renormalized, a sigmoid-gated shared expert), which llama.cpp
    checks too (tests/api/test_parity.cpp), so that the torch reference's MoE block is itself checked where both run."""
    check_against_reference(sdk, tmp_path, shape, weight_type, 9, rel_tol, min_match)


@pytest.mark.parametrize("weight_type,rel_tol,min_match", CASES)
def test_starcoder2_logits_match_the_torch_reference(sdk, tmp_path, weight_type, rel_tol, min_match):
    """StarCoder2 on tiny-starcoder2 (3 layers: LayerNorms with weights around 1 and random biases, biases on every
    projection, a GELU MLP without a gate, GQA): what the trainer needs to train drafts for StarCoder2 targets. The
    torch GELU rounds as ggml's CPU does (target.py: gelu_ggml); llama.cpp checks the same model in
    tests/api/test_parity.cpp."""
    check_against_reference(sdk, tmp_path, "tiny-starcoder2", weight_type, 11, rel_tol, min_match)
