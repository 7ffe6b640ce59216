"""Train a LongSpec draft layer for a GGUF target (see tools/train/README.md).

One step: a batch of random windows of the token stream; positions from Anchor-Offset indices; the frozen target
(in torch, no grad) gives its last layer's post-RoPE K/V and, for distillation, its logits; the draft runs as the
runtime does with cross-attention lagged by flash noisy training; the loss trains the draft layer only.

Scale-out is torch DDP: launch with torchrun (gloo on the CPU, NCCL on GPUs); each rank draws its own windows.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .data import WindowSampler, held_out_prefixes, list_files, tokenize_files
from .draft import LongSpecDraft
from .draft_io import export_draft, read_draft_gguf
from .gguf import GgufReader
from .indices import anchor_offset_positions, block_lags, noisy_lags
from .target import TargetModel


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, help="target model GGUF")
    p.add_argument("--data", action="append", required=True, help="directory or file of training text (repeatable)")
    p.add_argument("--glob", default="*", help="file name pattern, e.g. '*.py' (default: every file)")
    p.add_argument("--exclude", action="append", default=[], help="path prefix under a --data root to leave out")
    p.add_argument("--held-out-json", help="corpus.json whose held_out_prefixes are left out (code-7m)")
    p.add_argument("--max-tokens", type=int, default=4_000_000, help="tokens of data to tokenize (files shuffled)")
    p.add_argument("--val-tokens", type=int, default=50_000, help="tokens kept aside for validation")
    p.add_argument("--cache", help="token cache path prefix (skips re-tokenizing)")
    p.add_argument("--out", required=True, help="draft GGUF to write")
    p.add_argument("--init", help="start from this draft GGUF (e.g. a checkpoint)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--minutes", type=float, default=0, help="stop after this wall time (0 = no limit); "
                   "the cosine schedule then follows time instead of steps")
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=float, default=0.05, help="warm-up fraction of the schedule")
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--window", type=int, default=512, help="draft self-attention window")
    p.add_argument("--n-ff", type=int, default=0, help="draft MLP width (0 = the target's)")
    p.add_argument("--anchor-offset", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--max-position", type=int, default=0, help="bound of Anchor-Offset indices (0 = the target's "
                   "trained context from its GGUF)")
    p.add_argument("--sinks", type=int, default=4, help="at most this many anchor positions")
    p.add_argument("--noisy", action=argparse.BooleanOptionalAction, default=True, help="flash noisy training")
    p.add_argument("--gamma", type=int, default=5, help="noisy lags are drawn from 1..gamma-1")
    p.add_argument("--lags", choices=("sequence", "block"), default="sequence",
                   help="noisy lags: one per sequence (LongSpec) or cycling 1..gamma-1 over blocks (Beagle/GliDe)")
    p.add_argument("--loss", choices=("kl", "ce"), default="kl",
                   help="kl: match the target's distribution (distillation); ce: the data's next token (the reference)")
    p.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True, help="bf16 autocast")
    p.add_argument("--threads", type=int, default=0, help="torch threads per rank (0 = torch's default)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--log", help="JSON-lines log file")
    p.add_argument("--weight-type", choices=("f32", "f16", "bf16"), default="f32")
    return p.parse_args(argv)


class Run:
    def __init__(self, a):
        self.a = a
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if torch.cuda.is_available() else torch.device("cpu")
        if self.world > 1:
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        if a.threads:
            torch.set_num_threads(a.threads)
        self.logf = open(a.log, "a") if a.log and self.rank == 0 else None

    def log(self, msg: str, **fields):
        if self.rank != 0:
            return
        print(msg, flush=True)
        if self.logf and fields:
            self.logf.write(json.dumps(fields) + "\n")
            self.logf.flush()


def losses(run: Run, target: TargetModel, draft, tokens, positions, lags, loss_kind: str, bf16: bool):
    """-> (loss, top-1 agreement with the target's argmax), over positions 0..L-2 (each predicts the next token)."""
    dev = run.device
    tokens, positions, lags = tokens.to(dev), positions.to(dev), lags.to(dev)
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
        tlogits, tk, tv = target(tokens, positions, want_logits=True)
        h0 = target.embed(tokens)
        hidden = draft(h0, positions, tk, tv, lags)
        logits = target.lm_head(hidden)
    logits = logits[:, :-1].float()
    tlogits = tlogits[:, :-1].float()
    if loss_kind == "ce":
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    else:
        loss = F.kl_div(F.log_softmax(logits, -1), F.log_softmax(tlogits, -1), log_target=True, reduction="batchmean") \
            / logits.shape[1]
    agree = (logits.argmax(-1) == tlogits.argmax(-1)).float().mean()
    return loss, agree


def main(argv=None):
    a = parse_args(argv)
    run = Run(a)
    torch.manual_seed(a.seed)
    target = TargetModel(a.target).to(run.device)
    cfg = target.cfg
    max_position = a.max_position or cfg.n_ctx_train

    files = list_files(a.data, a.glob, list(a.exclude) + held_out_prefixes(a.held_out_json))
    stream = tokenize_files(a.target, files, a.max_tokens + a.val_tokens, seed=a.seed, cache=a.cache,
                            log=lambda m: run.log(m))
    val, train = stream[:a.val_tokens], stream[a.val_tokens:]
    sampler = WindowSampler(train, a.seq_len, seed=a.seed * 1000 + run.rank)

    draft = LongSpecDraft(cfg, n_ff=a.n_ff or None, window=a.window).to(run.device)
    history = {}  # how the --init draft was trained, kept in the output's provenance (a recipe in stages)
    if a.init:
        state, window = read_draft_gguf(a.init)
        draft.load_state_dict(state, strict=True)
        draft.window = window
        with GgufReader(a.init) as r:
            history = {"longspec.training.init." + k[len("longspec.training."):]: v
                       for k, v in r.metadata.items() if k.startswith("longspec.training.")}
    n_params = sum(p.numel() for p in draft.parameters())
    model = torch.nn.parallel.DistributedDataParallel(draft) if run.world > 1 else draft
    opt = torch.optim.AdamW(draft.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=a.wd)
    gen = torch.Generator().manual_seed(a.seed * 7919 + run.rank)

    # Fixed validation batch at lag 1 (the runtime's first draft step): at positions 0..L-1, and "far": the first
    # 4 tokens kept at 0..3 and the rest moved to the end of the trained context, as a window deep into a long
    # document sees its start. (RoPE is relative, so only the distance to the anchors changes; that distance is
    # what training at short lengths without Anchor-Offset indices never shows the draft.)
    vs = WindowSampler(val, a.seq_len, seed=12345)
    vtok = vs.batch(16)
    vpos_near = anchor_offset_positions(16, a.seq_len, max_position, gen, enabled=False)
    vpos_far = vpos_near + (vpos_near >= 4).long() * max(max_position - a.seq_len, 0)
    vlag = torch.ones(16, dtype=torch.int64)

    def validate():
        draft.eval()
        with torch.no_grad():
            near = losses(run, target, draft, vtok, vpos_near, vlag, a.loss, a.bf16)
            far = losses(run, target, draft, vtok, vpos_far, vlag, a.loss, a.bf16)
        draft.train()
        return float(near[0]), float(near[1]), float(far[0]), float(far[1])

    run.log(f"target {a.target}: {cfg.arch}, {cfg.n_layer} layers, d={cfg.n_embd}, vocab {cfg.n_vocab}; draft "
            f"{n_params:,} params (window {a.window}); {run.world} rank(s) on {run.device}; anchor-offset "
            f"{a.anchor_offset} (max position {max_position}), noisy {a.noisy} (gamma {a.gamma}, {a.lags} lags), loss {a.loss}")
    t0 = time.time()
    total_steps = a.steps
    step = 0
    while True:
        elapsed = time.time() - t0
        progress = step / total_steps
        if a.minutes > 0:
            progress = max(progress, elapsed / (a.minutes * 60))
        if progress >= 1.0 or step >= total_steps:
            break
        # Decide "stop" identically on every rank (time differs slightly across processes).
        if run.world > 1:
            flag = torch.tensor([progress], dtype=torch.float64)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            progress = float(flag)
            if progress >= 1.0:
                break
        lr = a.lr * (progress / a.warmup if progress < a.warmup else
                     0.5 * (1 + math.cos(math.pi * (progress - a.warmup) / (1 - a.warmup))))
        for g in opt.param_groups:
            g["lr"] = lr
        tokens = sampler.batch(a.batch)
        positions = anchor_offset_positions(a.batch, a.seq_len, max_position, gen, a.sinks, a.anchor_offset)
        if a.noisy and a.lags == "block":
            lags = block_lags(a.batch, a.seq_len, a.gamma, gen)
        else:
            lags = noisy_lags(a.batch, a.gamma, gen, a.noisy)
        loss, agree = losses(run, target, model, tokens, positions, lags, a.loss, a.bf16)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(draft.parameters(), a.clip)
        opt.step()
        step += 1
        if step % 10 == 0 or step == 1:
            run.log(f"step {step} loss {float(loss):.4f} agree {float(agree):.3f} lr {lr:.2e} gnorm {float(gnorm):.2f} "
                    f"{(time.time() - t0) / step:.2f}s/step",
                    step=step, loss=float(loss), agree=float(agree), lr=lr, t=time.time() - t0)
        if a.eval_every and step % a.eval_every == 0:
            v = validate()
            run.log(f"  val near: loss {v[0]:.4f} top-1 {v[1]:.3f} | far (positions +{max(max_position - a.seq_len, 0)}): "
                    f"loss {v[2]:.4f} top-1 {v[3]:.3f}", step=step, val_loss=v[0], val_agree=v[1], val_far_loss=v[2],
                    val_far_agree=v[3])
            if run.rank == 0:
                export_draft(draft, a.target, a.out, a.weight_type, extra=provenance(a, step, v, max_position, history))
    v = validate()
    run.log(f"done: {step} steps in {time.time() - t0:.0f} s; val near top-1 {v[1]:.3f}, far top-1 {v[3]:.3f}",
            step=step, val_loss=v[0], val_agree=v[1], val_far_loss=v[2], val_far_agree=v[3], done=True,
            seconds=time.time() - t0)
    if run.rank == 0:
        export_draft(draft, a.target, a.out, a.weight_type, extra=provenance(a, step, v, max_position, history))
        run.log(f"wrote {a.out}")
    if run.world > 1:
        dist.destroy_process_group()


def provenance(a, step: int, v, max_position: int, history: dict) -> dict:
    """This stage's recipe, and `history`: the --init draft's, under longspec.training.init.*."""
    return {**history,
        "longspec.training.steps": step,
        "longspec.training.seq_len": a.seq_len,
        "longspec.training.batch": a.batch * int(os.environ.get("WORLD_SIZE", "1")),
        "longspec.training.anchor_offset": int(a.anchor_offset),
        "longspec.training.max_position": max_position,  # the farthest position trained: what the draft may be used to
        "longspec.training.noisy": int(a.noisy),
        "longspec.training.lags": a.lags,
        "longspec.training.loss": a.loss,
        "longspec.training.lr": float(a.lr),
        "longspec.training.val_top1": float(v[1]),
        "longspec.training.val_far_top1": float(v[3]),
    }


if __name__ == "__main__":
    main()
