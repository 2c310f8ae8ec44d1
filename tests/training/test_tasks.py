"""Toy tasks: encodings, answer-only targets, a held-out set training never sees."""

import numpy as np
import pytest

from tinygrad_attn.training.held_out import is_held_out
from tinygrad_attn.training.tasks import END, IGNORE, PLUS, SEP, TASKS, decode, get_task


@pytest.mark.parametrize("name", sorted(TASKS))
def test_targets_are_the_answer_tokens_only(name):
    task = get_task(name)
    ids, targets = task.batch(np.random.default_rng(0), 32)
    assert ids.shape == targets.shape == (32, task.seq_len)
    for row_ids, row_targets in zip(ids, targets):
        counted = row_targets != IGNORE
        start = int(np.argmax(counted))
        prompt = row_ids[:start + 1].tolist()
        assert row_targets[counted].tolist() == task.solve(prompt)
        assert not is_held_out(prompt)
        assert row_targets[counted][-1] == END


def test_solutions():
    assert get_task("copy").solve([3, 1, 2, SEP]) == [3, 1, 2, END]
    assert get_task("reverse").solve([3, 1, 2, SEP]) == [2, 1, 3, END]
    assert get_task("sort").solve([3, 1, 2, SEP]) == [1, 2, 3, END]
    add = get_task("add")
    assert decode(add.parse("42 + 199")) == "2 4 0 + 9 9 1 ="            # least significant first
    assert add.solve(add.parse("42 + 199")) == [1, 4, 2, 0, END]         # 241, the same way
    assert add.solve(add.parse("999+999")) == [8, 9, 9, 1, END]
    assert add.solve(add.parse("7 + 5")) == [2, 1, 0, 0, END]


def test_every_add_prompt_is_solved_and_read_back_as_the_sum():
    add, rng = get_task("add"), np.random.default_rng(0)
    for _ in range(500):
        a, b = (int(n) for n in rng.integers(0, 1000, 2))
        prompt = add.parse(f"{a} + {b}")
        assert add.gloss(prompt, add.solve(prompt)) == f"{a} + {b} = {a + b}"
        assert prompt[:3] == [a % 10, a // 10 % 10, a // 100]       # ones, tens, hundreds
    assert add.gloss(add.parse("1 + 2"), [3, 0, 0, PLUS, END]) == ""   # not digits: no sum to show
    assert add.gloss(add.parse("1 + 2"), [3, 0, 0]) == ""             # no END yet
    assert get_task("copy").gloss([3, SEP], [3, END]) == ""           # its tokens read as they are


@pytest.mark.parametrize("name", sorted(TASKS))
def test_held_out_set_is_fixed_distinct_and_never_trained_on(name):
    task = get_task(name)
    held = task.held_out(200)
    assert held == task.held_out(200) and len({tuple(p) for p in held}) == 200
    assert all(is_held_out(p) for p in held)
    rng = np.random.default_rng(1)
    trained = set()
    for _ in range(20):
        ids, targets = task.batch(rng, 64)
        for row_ids, row_targets in zip(ids, targets):
            trained.add(tuple(row_ids[:int(np.argmax(row_targets != IGNORE)) + 1]))
    assert trained.isdisjoint(tuple(p) for p in held)


def test_parse_errors_and_unknown_task():
    with pytest.raises(ValueError, match="single digits"):
        get_task("reverse").parse("12 3")
    with pytest.raises(ValueError, match="at most 8 digits"):
        get_task("sort").parse("1 2 3 4 5 6 7 8 9")
    with pytest.raises(ValueError, match="add: expected 'a \\+ b'"):
        get_task("add").parse("1234 + 1")
    with pytest.raises(ValueError, match="unknown task 'rot13'"):
        get_task("rot13")
