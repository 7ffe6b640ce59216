"""LongSpec's two training-time devices, as small pure functions (tested in tests/test_indices.py).

Anchor-Offset indices (paper §3.2; reference LlamaGlide.forward): the first `sink` positions (0..max_sinks, random)
keep indices 0..sink-1 as attention-sink anchors, every later token is shifted by a random offset, bounded so the
last index stays below the target's trained context. Short training sequences thereby train every position
index the draft meets at inference, and the target (which sees the same indices) stays in distribution.

Flash noisy training (paper §3.2): during speculation the draft's query at position t sees the target's KV only up
to t - j with 1 <= j < gamma (the target commits its cache only after verification). Training draws that lag j per
sequence; without noise the lag is 0 (ordinary causal cross-attention, the mismatch the paper removes).

Block lags (Beagle's inverse block attention, GliDe's block mask): the sequence is cut into blocks of k = gamma - 1
tokens from a random offset, and the query at the i-th position of a block (i = 1..k) sees target KV only up to the
block's start, i.e. lag i. That is one chain round of speculation: the root sees lag 1, the node at depth d lag d+1;
every query of the sequence trains one of those lags.
"""
from __future__ import annotations

import torch


def anchor_offset_positions(B: int, L: int, max_position: int, gen: torch.Generator, max_sinks: int = 4,
                            enabled: bool = True) -> torch.Tensor:
    """[B, L] int64 positions. Disabled: 0..L-1. Enabled: 0..sink-1, then sink+off..L-1+off, with
    sink ~ U{0..max_sinks} and off ~ U{0..max(max_position - L, 0)} per sequence, so every index < max(max_position, L)."""
    base = torch.arange(L, dtype=torch.int64).expand(B, L).clone()
    if not enabled:
        return base
    sinks = torch.randint(0, max_sinks + 1, (B, 1), generator=gen)
    offsets = torch.randint(0, max(max_position - L, 0) + 1, (B, 1), generator=gen)
    return base + torch.where(base >= sinks, offsets, torch.zeros_like(offsets))


def noisy_lags(B: int, gamma: int, gen: torch.Generator, enabled: bool = True) -> torch.Tensor:
    """[B] lags: U{1..gamma-1} with noise, else 0."""
    if not enabled:
        return torch.zeros(B, dtype=torch.int64)
    if gamma < 2:
        raise ValueError("noisy training needs gamma >= 2")
    return torch.randint(1, gamma, (B,), generator=gen)


def block_lags(B: int, L: int, gamma: int, gen: torch.Generator) -> torch.Tensor:
    """[B, L] lags 1..gamma-1 cycling over blocks of gamma-1 positions that start at a random offset per sequence."""
    k = gamma - 1
    if k < 1:
        raise ValueError("block lags need gamma >= 2")
    offsets = torch.randint(0, k, (B, 1), generator=gen)
    return (torch.arange(L).view(1, L) - offsets) % k + 1
