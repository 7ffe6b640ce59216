"""Training end to end on a fixture target: the loss falls, the written draft loads in the SDK, and torchrun DDP
with two CPU processes (gloo) runs the same script."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, model_path
from specula_train import train
from specula_train.gguf import GgufReader

STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
         "One day, she saw a big red ball. She ran to the ball and kicked it. The ball went up in the sky. "
         "Lily was happy. She played with the ball all day. Then her mom called her home for dinner.\n")


@pytest.fixture()
def story_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for i in range(6):
        (d / f"s{i}.txt").write_text(STORY * (i + 2))
    return str(d)


def read_log(path):
    return [json.loads(line) for line in open(path)]


def test_training_lowers_the_loss_and_writes_a_draft_the_sdk_loads(sdk, tmp_path, story_dir):
    target = model_path("stories260K.gguf")
    out, log = str(tmp_path / "d.gguf"), str(tmp_path / "log.jsonl")
    train.main(["--target", target, "--data", story_dir, "--out", out, "--log", log, "--steps", "60", "--batch", "8",
                "--seq-len", "64", "--val-tokens", "200", "--max-tokens", "5000", "--lr", "1e-2", "--eval-every", "0",
                "--max-position", "512", "--window", "32"])
    rows = read_log(log)
    first = next(r for r in rows if "loss" in r)
    last = [r for r in rows if "loss" in r][-1]
    assert last["loss"] < 0.7 * first["loss"], (first, last)
    done = rows[-1]
    assert done.get("done") and done["val_agree"] > 0.3
    model = sdk.Model(target)
    session = sdk.Session(model, out, n_ctx=64)
    ids = model.tokenize("Once upon a time", add_special=True)
    assert session.draft_logits(ids).shape == (model.n_vocab,)
    session.close()


def test_a_second_stage_keeps_the_first_stages_recipe(tmp_path, story_dir):
    # A recipe in stages (models/README.md: code-7m's draft, 256-token windows then 2048 from that draft): the
    # output's provenance is its own stage's, and the --init draft's under longspec.training.init.*.
    target = model_path("stories260K.gguf")
    first, second = str(tmp_path / "a.gguf"), str(tmp_path / "b.gguf")
    common = ["--target", target, "--data", story_dir, "--val-tokens", "200", "--max-tokens", "5000", "--eval-every", "0",
              "--window", "32"]
    train.main(common + ["--out", first, "--steps", "4", "--batch", "4", "--seq-len", "32", "--max-position", "256"])
    train.main(common + ["--out", second, "--steps", "2", "--batch", "2", "--seq-len", "64", "--max-position", "512",
                         "--lr", "1e-3", "--init", first])
    with GgufReader(second) as r:
        meta = r.metadata
    assert meta["longspec.training.steps"] == 2 and meta["longspec.training.seq_len"] == 64
    assert meta["longspec.training.max_position"] == 512
    assert abs(meta["longspec.training.lr"] - 1e-3) < 1e-9
    assert meta["longspec.training.init.steps"] == 4 and meta["longspec.training.init.seq_len"] == 32
    assert meta["longspec.training.init.max_position"] == 256
    assert "longspec.training.init.init.steps" not in meta  # the first stage started from nothing


def test_torchrun_two_process_gloo(tmp_path, story_dir):
    target = model_path("stories260K.gguf")
    out, log = str(tmp_path / "ddp.gguf"), str(tmp_path / "ddp.jsonl")
    # --redirects 2 --tee 2: Debian's torch 1.13 on Python 3.11 cannot parse torchrun's default "0" (an IntFlag
    # change in 3.11 makes Std.from_str("0") return None); stderr to a file and teed to the console parses.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "--redirects", "2",
           "--tee", "2",
           os.path.join(REPO, "tools", "train", "train.py"), "--target", target, "--data", story_dir, "--out", out,
           "--log", log, "--steps", "6", "--batch", "4", "--seq-len", "64", "--val-tokens", "200",
           "--max-tokens", "5000", "--eval-every", "0", "--threads", "1", "--no-bf16"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "2 rank(s)" in r.stdout
    assert os.path.exists(out)
    assert read_log(log)[-1]["step"] == 6


def test_self_distillation_writes_the_targets_own_text(tmp_path):
    from specula_train import selfdistill
    try:
        selfdistill.find_cli()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    out = tmp_path / "sd"
    selfdistill.main(["--target", model_path("stories260K.gguf"), "--out", str(out), "--samples", "3", "-n", "16"])
    texts = [p.read_text() for p in sorted(out.iterdir())]
    assert len(texts) == 3 and all(t.startswith(("Once upon a time", "One day", "Lily wanted")) for t in texts)
    assert len(set(texts)) == 3  # seeded samples differ
