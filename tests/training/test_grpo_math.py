"""GRPO math against hand-computed values and an independent per-token reference (loss and grad)."""

from __future__ import annotations

import math

import pytest
import torch

from clawloop.training.grpo import (
    episode_reward,
    group_advantages,
    grpo_loss,
    grpo_token_loss,
    next_token_logprobs,
)


def test_group_advantages_hand_values():
    # rewards 1,0,0,1: mean 0.5, sample std sqrt(1/3) = 0.5773503
    adv = group_advantages([1.0, 0.0, 0.0, 1.0], eps=1e-4)
    assert adv == pytest.approx([0.865875, -0.865875, -0.865875, 0.865875], abs=1e-6)
    adv = group_advantages([0.0, 0.5, 1.0], eps=0.0)  # mean .5, std .5
    assert adv == pytest.approx([-1.0, 0.0, 1.0])


def test_zero_variance_and_singleton_groups_are_dropped():
    assert group_advantages([1.0, 1.0, 1.0]) is None
    assert group_advantages([0.0, 0.0]) is None
    assert group_advantages([1.0]) is None


def test_episode_reward_is_the_outcome_unless_fraction_is_asked_for():
    passed, failed = {"passed": True, "reward": 1.0}, {"passed": False, "reward": 0.9}
    assert [episode_reward(passed), episode_reward(failed)] == [1.0, 0.0]
    assert [episode_reward(r, "fraction") for r in (passed, failed)] == [1.0, 0.9]
    with pytest.raises(ValueError, match="reward kind"):
        episode_reward(passed, "shaped")


def _one(x):
    return torch.tensor([[x]], dtype=torch.float64)


def test_clipped_ratio_hand_values():
    logp = _one(math.log(0.5)).requires_grad_()
    old = _one(math.log(0.25))  # ratio 2
    mask = _one(1.0)
    # A > 0, ratio above 1 + eps: clipped term wins (-1.2), no gradient flows
    loss = grpo_loss(logp, old, torch.tensor([1.0], dtype=torch.float64), mask, clip_eps=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(-1.2) and logp.grad.item() == 0.0
    # A < 0: the unclipped term is the larger loss (2.0); d/dlogp (-ratio*A) = -A*ratio = 2
    logp.grad = None
    loss = grpo_loss(logp, old, torch.tensor([-1.0], dtype=torch.float64), mask, clip_eps=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(2.0) and logp.grad.item() == pytest.approx(2.0)


def test_missing_sampling_logprob_is_on_policy():
    logp = _one(math.log(0.3)).requires_grad_()
    loss = grpo_loss(logp, _one(math.nan), torch.tensor([0.7], dtype=torch.float64), _one(1.0), 0.2)
    loss.backward()
    assert loss.item() == pytest.approx(-0.7) and logp.grad.item() == pytest.approx(-0.7)


def _reference(logits, ids, old, adv, mask, clip, ref_logits, beta):
    """Plain loops, one token at a time; shares no code with training.grpo."""
    total, count = 0.0, 0
    for b in range(ids.shape[0]):
        for j in range(1, ids.shape[1]):
            if mask[b, j] == 0:
                continue
            lp = torch.log_softmax(logits[b, j - 1], dim=-1)[ids[b, j]]
            o = old[b, j]
            r = torch.exp(lp - (o if not math.isnan(o.item()) else lp.detach()))
            a = adv[b]
            term = torch.maximum(-r * a, -torch.clamp(r, 1 - clip, 1 + clip) * a)
            rl = torch.log_softmax(ref_logits[b, j - 1], dim=-1)[ids[b, j]]
            term = term + beta * (torch.exp(rl - lp) - (rl - lp) - 1)
            total = total + term
            count += 1
    return total / count


def test_loss_and_gradient_equal_reference():
    g = torch.Generator().manual_seed(0)
    B, L, V = 3, 7, 11
    logits = torch.randn(B, L, V, generator=g, dtype=torch.float64, requires_grad=True)
    ref_logits = torch.randn(B, L, V, generator=g, dtype=torch.float64)
    ids = torch.randint(0, V, (B, L), generator=g)
    mask = (torch.rand(B, L, generator=g) > 0.3).double()
    mask[:, 0] = 0
    # sampling logprobs near the current ones (so some ratios clip), NaN on a third of the tokens
    with torch.no_grad():
        cur = torch.log_softmax(logits, -1)[:, :-1].gather(-1, ids[:, 1:, None]).squeeze(-1)
        old = torch.full((B, L), math.nan, dtype=torch.float64)
        old[:, 1:] = cur + 0.5 * torch.randn(B, L - 1, generator=g, dtype=torch.float64)
        old[torch.rand(B, L, generator=g) < 0.33] = math.nan
    adv = torch.tensor([1.3, -0.4, 0.9], dtype=torch.float64)
    beta, clip = 0.05, 0.2

    logp = next_token_logprobs(logits, ids)
    ref_lp = next_token_logprobs(ref_logits, ids)
    ours = grpo_loss(logp, old[:, 1:], adv, mask[:, 1:], clip, ref_lp, beta)
    (g_ours,) = torch.autograd.grad(ours, logits)
    theirs = _reference(logits, ids, old, adv, mask, clip, ref_logits, beta)
    (g_ref,) = torch.autograd.grad(theirs, logits)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-10)
    assert torch.allclose(g_ours, g_ref, atol=1e-12)
    _, stats = grpo_token_loss(logp, old[:, 1:], adv, mask[:, 1:], clip, ref_lp, beta)
    assert 0 < stats["clip_frac"] < 1 and 0 < stats["offpolicy_frac"] < 1  # both paths exercised


def test_half_precision_logprobs_match_float32():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 9, generator=g)
    ids = torch.randint(0, 9, (2, 5), generator=g)
    full = next_token_logprobs(logits, ids)
    half = next_token_logprobs(logits.bfloat16(), ids)
    assert torch.allclose(full, half, atol=0.05)
