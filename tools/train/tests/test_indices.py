"""Anchor-Offset indices, noisy lags and the draft's attention masks."""
import torch

from specula_train.draft import cross_attention_mask, self_attention_mask
from specula_train.indices import anchor_offset_positions, block_lags, noisy_lags


def test_disabled_anchor_offset_is_plain_positions():
    g = torch.Generator().manual_seed(0)
    pos = anchor_offset_positions(3, 10, 1000, g, enabled=False)
    assert torch.equal(pos, torch.arange(10).expand(3, 10))


def test_anchor_offset_keeps_sinks_and_shifts_the_rest_within_bounds():
    g = torch.Generator().manual_seed(1)
    B, L, max_pos = 4000, 64, 1024
    pos = anchor_offset_positions(B, L, max_pos, g, max_sinks=4)
    assert pos.max() < max_pos and pos.min() == 0
    sinks_seen = set()
    offsets = []
    # Checked on Python lists: iterating 4,000 rows as tensors made tens of thousands of tensor objects, and Debian's
    # torch 1.13 on Python 3.11 once crashed in the garbage collector among them (CI rehearsal, trainer:pytest).
    for row in pos.tolist():
        jumps = [i for i in range(L - 1) if row[i + 1] - row[i] != 1]
        assert len(jumps) <= 1  # one jump at most: anchors | shifted run
        sink = jumps[0] + 1 if jumps else (0 if row[0] != 0 else None)
        if sink is None:  # offset 0 (or no jump visible): positions are 0..L-1
            assert row == list(range(L))
            continue
        assert row[:sink] == list(range(sink))  # anchors keep 0..sink-1
        assert [p - row[sink] for p in row[sink:]] == list(range(L - sink))  # the rest stays consecutive
        sinks_seen.add(sink)
        offsets.append(row[sink] - sink)
    assert sinks_seen == {0, 1, 2, 3, 4}
    # offsets spread over [0, max_pos - L]: both ends of the range are reached by some sequence
    assert min(offsets) < 50 and max(offsets) > max_pos - L - 50


def test_anchor_offset_with_sequences_longer_than_the_bound_is_plain():
    g = torch.Generator().manual_seed(2)
    pos = anchor_offset_positions(8, 300, 256, g)
    assert torch.equal(pos, torch.arange(300).expand(8, 300))


def test_noisy_lags_range_and_disabled():
    g = torch.Generator().manual_seed(3)
    lags = noisy_lags(10000, 5, g)
    assert set(lags.tolist()) == {1, 2, 3, 4}
    assert torch.equal(noisy_lags(5, 5, g, enabled=False), torch.zeros(5, dtype=torch.int64))


def test_cross_attention_mask_hides_the_last_lag_tokens():
    lags = torch.tensor([0, 1, 3])
    m = cross_attention_mask(6, 6, lags)
    for b, lag in enumerate(lags.tolist()):
        for i in range(6):
            for j in range(6):
                assert bool(m[b, i, j]) == (j <= i - lag)
    # with a lag, the first rows see nothing (the attention then returns zeros, not NaN)
    assert not m[2, :3].any()


def test_self_attention_mask_is_a_causal_window():
    m = self_attention_mask(10, 3)[0]
    for i in range(10):
        for j in range(10):
            assert bool(m[i, j]) == (0 <= i - j <= 3)


def test_block_lags_cycle_one_to_gamma_minus_one_from_a_random_offset():
    g = torch.Generator().manual_seed(4)
    lags = block_lags(500, 20, 5, g)
    starts = set()
    for row in lags:
        assert set(row.tolist()) == {1, 2, 3, 4}
        first_one = int((row == 1).nonzero()[0])
        starts.add(first_one)
        # after each 1 the lags count up to 4 and start again (a chain round: root lag 1, depth d lag d + 1)
        assert torch.equal(row[first_one:first_one + 8], torch.tensor([1, 2, 3, 4, 1, 2, 3, 4]))
    assert starts == {0, 1, 2, 3}


def test_cross_attention_mask_with_a_lag_per_query():
    lags = torch.tensor([[1, 2, 1, 2]])
    m = cross_attention_mask(4, 4, lags)[0]
    for i in range(4):
        for j in range(4):
            assert bool(m[i, j]) == (j <= i - int(lags[0, i]))
