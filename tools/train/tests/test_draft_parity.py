"""The torch draft computes what the SDK's runtime computes: same weights, same context -> same logits.

Tolerance: max |torch - SDK| <= 1e-4 x max |SDK logit| (float32 on both sides; what differs is summation order
in the matrix products and softmax). Measured: ~2e-6 relative.
"""
import numpy as np
import pytest
import torch

from conftest import model_path
from specula_train.draft import LongSpecDraft
from specula_train.draft_io import export_draft, read_draft_gguf
from specula_train.target import TargetModel

TOLERANCE = 1e-4


def perturbed_draft(sdk, target_path, tmp_path, window, seed):
    """The SDK's random draft for the target, with larger random weights (so every part of the layer matters)."""
    model = sdk.Model(target_path)
    model.write_random_draft(str(tmp_path / "init.gguf"), window=window, seed=seed)
    target = TargetModel(target_path)
    state, w = read_draft_gguf(str(tmp_path / "init.gguf"))
    g = torch.Generator().manual_seed(seed)
    for k in state:
        state[k] = state[k] + 0.1 * torch.randn(state[k].shape, generator=g)
    draft = LongSpecDraft(target.cfg, n_ff=state["mlp.gate_proj.weight"].shape[0], window=w)
    draft.load_state_dict(state)
    path = str(tmp_path / "draft.gguf")
    export_draft(draft, target_path, path)
    return model, target, draft, path


@pytest.mark.parametrize("name,window", [
    ("code-7m/model.gguf", 16),           # window far below the context: the ring buffer wraps
    ("code-7m/model.gguf", 512),
    ("synth-qwen2-bias-f32.gguf", 8),     # NEOX RoPE, biases in the target
    ("synth-llama-gqa-f16.gguf", 32),     # F16 target, grouped-query attention
    ("stories260K.gguf", 4),              # 8 heads over 4 KV heads, head_dim 8, window of 4
])
def test_torch_draft_logits_equal_sdk_draft_logits(sdk, tmp_path, name, window):
    target_path = model_path(name)
    model, target, draft, path = perturbed_draft(sdk, target_path, tmp_path, window, seed=5)
    session = sdk.Session(model, path, n_ctx=256)
    rng = np.random.default_rng(1)
    ids = [model.bos] + rng.integers(3, model.n_vocab, 70).tolist()
    tokens = torch.tensor([ids])
    with torch.no_grad():
        _, k, v = target(tokens, torch.arange(len(ids))[None])
        # lag 1: the draft step at root t reads the target's cache [0, t)
        logits = target.lm_head(draft(target.embed(tokens), torch.arange(len(ids))[None], k, v, torch.tensor([1])))[0]
    for n in (1, 2, 3, window, window + 1, window + 2, 40, len(ids)):
        if n > len(ids):
            continue
        ref = session.draft_logits(ids[:n])
        err = np.abs(logits[n - 1].numpy() - ref).max() / np.abs(ref).max()
        assert err <= TOLERANCE, f"context {n}: relative error {err:.2e}"
    session.close()


def test_exported_draft_round_trips_and_is_refused_by_another_target(sdk, tmp_path):
    model, target, draft, path = perturbed_draft(sdk, model_path("code-7m/model.gguf"), tmp_path, 64, seed=9)
    state, window = read_draft_gguf(path)
    assert window == 64
    for k, v in draft.state_dict().items():
        assert torch.equal(state[k], v.float()), k
    other = sdk.Model(model_path("stories260K.gguf"))
    with pytest.raises(sdk.SpeculaError) as e:
        sdk.Session(other, path)
    assert e.value.status == "SPECULA_ERR_INCOMPATIBLE"
