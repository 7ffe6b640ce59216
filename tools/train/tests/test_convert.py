"""The converter for official LongSpec checkpoints, on synthetic checkpoints with the official key names."""
import numpy as np
import pytest
import torch

from conftest import model_path
from specula_train.convert_longspec import convert
from specula_train.draft import LongSpecDraft
from specula_train.draft_io import read_draft_gguf
from specula_train.safetensors import read_safetensors, write_safetensors
from specula_train.target import TargetModel


def official_state(cfg, seed):
    """A LlamaGlideDecoderLayer-shaped state dict, cross_attn.k_proj / v_proj included (unused at inference)."""
    g = torch.Generator().manual_seed(seed)
    draft = LongSpecDraft(cfg)
    state = {k: (v + 0.05 * torch.randn(v.shape, generator=g)).numpy() for k, v in draft.state_dict().items()}
    kv = cfg.n_head_kv * cfg.head_dim
    state["cross_attn.k_proj.weight"] = np.ones((kv, cfg.n_embd), np.float32)
    state["cross_attn.k_proj.bias"] = np.ones(kv, np.float32)
    state["cross_attn.v_proj.weight"] = np.ones((kv, cfg.n_embd), np.float32)
    state["cross_attn.v_proj.bias"] = np.ones(kv, np.float32)
    return state


@pytest.mark.parametrize("prefix,dtype", [("", "BF16"), ("draft_model.", "F16"), ("", "F32")])
def test_converted_checkpoint_loads_in_the_sdk_with_the_same_weights(sdk, tmp_path, prefix, dtype):
    target_path = model_path("code-7m/model.gguf")
    cfg = TargetModel(target_path).cfg
    state = official_state(cfg, seed=3)
    ckpt = str(tmp_path / "model.safetensors")
    write_safetensors(ckpt, {prefix + k: v for k, v in state.items()}, dtype=dtype, metadata={"format": "pt"})
    stored = read_safetensors(ckpt)  # what the file holds (after BF16/F16 rounding)
    out = str(tmp_path / "draft.gguf")
    convert(ckpt, target_path, out, window=512, weight_type="f32")
    converted, window = read_draft_gguf(out)
    assert window == 512
    assert "cross_attn.k_proj.weight" not in converted
    for k, v in converted.items():
        np.testing.assert_array_equal(v.numpy(), stored[prefix + k], err_msg=k)
    # and the SDK accepts it for this target
    model = sdk.Model(target_path)
    session = sdk.Session(model, out, n_ctx=64)
    logits = session.draft_logits([model.bos, 100, 200])
    assert np.isfinite(logits).all()
    session.close()


def test_checkpoint_for_another_model_is_refused(tmp_path):
    cfg = TargetModel(model_path("stories260K.gguf")).cfg
    ckpt = str(tmp_path / "m.safetensors")
    write_safetensors(ckpt, official_state(cfg, seed=1))
    with pytest.raises(ValueError, match="shape"):
        convert(ckpt, model_path("code-7m/model.gguf"), str(tmp_path / "d.gguf"))


def test_checkpoint_without_draft_tensors_is_refused(tmp_path):
    ckpt = str(tmp_path / "m.safetensors")
    write_safetensors(ckpt, {"lm_head.weight": np.zeros((4, 4), np.float32)})
    with pytest.raises(ValueError, match="missing"):
        convert(ckpt, model_path("code-7m/model.gguf"), str(tmp_path / "d.gguf"))


def test_hostile_safetensors_raise(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(b"\xff" * 16)
    with pytest.raises(ValueError):
        read_safetensors(str(p))
