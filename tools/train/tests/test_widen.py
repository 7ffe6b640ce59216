"""widen.py: a model grown to a larger layer shape computes what the original computes (tokens and logits through
the SDK's CLI), and shapes that would change the function are refused."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, model_path

WIDEN = os.path.join(REPO, "tools", "train", "widen.py")


def greedy(cli, model, n=48):
    """Greedy ids and top-5 logits of `specula generate`, one entry per token."""
    r = subprocess.run([cli, "generate", "-m", model, "--prompt-ids", "1,403,407,261,415", "--temp", "0", "-n", str(n),
                        "--format", "jsonl", "--top-logits", "5", "--backend", "cpu", "-t", "1", "--kv-type", "f32"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith('{"id"')]
    return [row["id"] for row in rows], [row["top"] for row in rows]


def widen(src, dst, *args):
    return subprocess.run([sys.executable, WIDEN, src, dst, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("shape", [
    ["--embd", "128", "--heads", "16", "--kv-heads", "4", "--ffn", "344", "--layers", "7"],   # 2 -> 4 heads per KV head
    ["--embd", "256", "--heads", "32", "--kv-heads", "8", "--ffn", "512", "--layers", "5"],   # KV heads grow too
])
def test_widened_model_generates_the_original_tokens(tmp_path, shape):
    from specula_train import selfdistill
    try:
        cli = selfdistill.find_cli()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    src = model_path("stories260K.gguf")
    dst = str(tmp_path / "wide.gguf")
    r = widen(src, dst, *shape, "--type", "f32")
    assert r.returncode == 0, r.stderr
    ids0, top0 = greedy(cli, src)
    ids1, top1 = greedy(cli, dst)
    assert len(ids0) == 48 and ids1 == ids0
    worst = max(abs(a[1] - b[1]) / max(1.0, abs(a[1])) for ra, rb in zip(top0, top1) for a, b in zip(ra, rb))
    assert [[t[0] for t in row] for row in top1] == [[t[0] for t in row] for row in top0]
    assert worst < 1e-4, f"top-5 logits differ by {worst:.2e} (relative)"


def test_shapes_that_would_change_the_function_are_refused(tmp_path):
    src = model_path("stories260K.gguf")  # head dimension 8, 8 heads over 4 KV heads
    for args, message in [
        (["--embd", "128", "--heads", "8", "--kv-heads", "4", "--ffn", "344"], "head dimension must stay 8"),
        (["--embd", "32", "--heads", "4", "--kv-heads", "2", "--ffn", "344"], "widening only grows"),
        (["--embd", "128", "--heads", "16", "--kv-heads", "16", "--ffn", "344"], "query heads per KV head"),
        (["--embd", "128", "--heads", "16", "--kv-heads", "4", "--ffn", "100"], "FFN width"),
    ]:
        r = widen(src, str(tmp_path / "x.gguf"), *args)
        assert r.returncode != 0 and message in r.stderr, (args, r.stderr)


def test_widened_draft_proposes_what_it_proposed_for_the_small_target(tmp_path):
    """The LongSpec draft widened with its target: the same rounds, acceptance per depth and tau as the original pair."""
    from specula_train import selfdistill
    try:
        cli = selfdistill.find_cli()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    src = model_path("stories260K.gguf")
    draft = os.path.join(REPO, "models", "drafts", "stories260K.longspec.gguf")
    dst, dst_draft = str(tmp_path / "wide.gguf"), str(tmp_path / "wide-draft.gguf")
    r = widen(src, dst, "--embd", "256", "--heads", "32", "--kv-heads", "8", "--ffn", "512", "--layers", "7",
              "--type", "f32", "--draft", draft, "--draft-out", dst_draft)
    assert r.returncode == 0, r.stderr

    def spec_stats(model, d):
        out = subprocess.run([cli, "generate", "-m", model, "--draft", d, "--tree", "1,1,1,1", "-p", "Once upon a time",
                              "-n", "96", "--temp", "0", "--format", "jsonl", "--backend", "cpu", "-t", "1", "--kv-type", "f32"],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        lines = out.stdout.splitlines()
        ids = [json.loads(line)["id"] for line in lines if line.startswith('{"id"')]
        stats = json.loads(lines[-1])["stats"]
        return ids, {k: stats[k] for k in ("drafter", "rounds", "drafted", "accepted", "accept_per_depth", "tau")}

    ids0, s0 = spec_stats(src, draft)
    ids1, s1 = spec_stats(dst, dst_draft)
    assert ids1 == ids0
    assert s1 == s0 and s0["drafter"] == "longspec" and s0["accepted"] > 0


def test_q8_0_output_is_ggml_blocks_and_keeps_zero_weights_zero():
    """--type q8_0 writes ggml's Q8_0 blocks: the reader gives back each value within half a step of its block's
    scale, and the zero rows and columns widening adds stay exactly zero (so they still write nothing)."""
    import numpy as np
    from specula_train.gguf import Q8_0, dequantize, quantize_q8_0
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 96)).astype(np.float32)
    x[:, 64:] = 0.0
    x[1] = 0.0
    raw = quantize_q8_0(x).reshape(-1)
    assert raw.size == x.size // 32 * 34
    y = dequantize(raw, Q8_0, x.size).reshape(x.shape)
    step = np.repeat(np.abs(x.reshape(-1, 32)).max(axis=1) / 127, 32).reshape(x.shape)
    # half a step, plus the F16 rounding of the stored scale times the largest int8 (127 * 2^-11 steps)
    assert np.all(np.abs(y - x) <= step * (0.5 + 127 * 2.0 ** -11) + 1e-12)
    assert np.all(y[:, 64:] == 0.0) and np.all(y[1] == 0.0)
