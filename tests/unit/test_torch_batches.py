"""The batch order every torch worker (torch:none, torch:ddp, torch:ps-*) draws from: no cluster needed."""

from __future__ import annotations

import itertools

import torch

from raylab.frameworks.torch.worker import shuffled_batches


def take(n: int, batch: int, seed: int, count: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [b.tolist() for b in itertools.islice(shuffled_batches(n, batch, gen), count)]


def test_each_pass_is_a_new_permutation_cut_into_whole_batches():
    batches = take(n=10, batch=3, seed=0, count=6)  # two passes of 3 batches, 1 sample left out each time
    assert all(len(b) == 3 for b in batches)
    first, second = sum(batches[:3], []), sum(batches[3:], [])
    assert len(set(first)) == len(set(second)) == 9  # no sample twice in a pass
    assert first != second  # reshuffled between passes


def test_the_order_is_seeded_and_seeds_differ():
    assert take(100, 8, seed=1, count=30) == take(100, 8, seed=1, count=30)
    assert take(100, 8, seed=1, count=30) != take(100, 8, seed=2, count=30)


def test_the_order_is_the_one_the_loops_had_before():
    """What the torch loops drew inline before this function existed: a permutation per pass, cut."""
    gen = torch.Generator().manual_seed(7)
    expected = []
    for _ in range(3):
        expected += [b.tolist() for b in torch.randperm(50, generator=gen)[: 50 // 16 * 16].split(16)]
    assert take(50, 16, seed=7, count=9) == expected
