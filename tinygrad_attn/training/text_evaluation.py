"""How a language model is measured on its text task: the validation loss (nats per token, and per
character so that runs of either tokenizer compare) and samples of what it writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import functional as F
from ..engine import no_grad
from ..nn import TinyTransformer
from ..nn.sampling import generate_beyond_context
from ..tensor import Tensor
from ..text import CharTokenizer
from .sample_options import TEMPERATURE, TOP_K

if TYPE_CHECKING:
    from .text_task import TextTask

__all__ = ["SAMPLE_TOKENS", "characters_per_token", "loss_units", "sample_text", "validation_loss"]

SAMPLE_TOKENS = 200


def validation_loss(model: TinyTransformer, task: TextTask, windows: int, batch_size: int = 32) -> float:
    """Mean cross-entropy (nats per token) over `windows` fixed windows of the validation split,
    without grad and without dropout (the model's training mode is restored); it draws nothing
    random, so a run's random streams are the same with or without it."""
    ids, targets = task.held_out(windows)
    device = model.head.weight.device
    was_training = model.training
    model.eval()
    total = 0.0
    try:
        with no_grad():
            for i in range(0, len(ids), batch_size):
                logits = model(Tensor(ids[i:i + batch_size], device=device))          # (b, T, V)
                loss = F.cross_entropy(logits, Tensor(targets[i:i + batch_size], device=device))
                total += loss.item() * len(ids[i:i + batch_size])
    finally:
        model.train(was_training)
    return total / len(ids)


def characters_per_token(task: TextTask, windows: int) -> float:
    """How many characters of text each predicted token of ``validation_loss``'s windows holds on
    average: the loss in nats per token divided by this is the loss in nats per character (every
    window predicts the same number of tokens, so the ratio is exact). Each window's targets are
    decoded whole, so a character split over two byte-level tokens counts once."""
    _, targets = task.held_out(windows)
    return sum(len(task.tokenizer.decode(row.tolist())) for row in targets) / targets.size


def sample_text(model: TinyTransformer, task: TextTask, step: int, seed: int,
                tokens: int = SAMPLE_TOKENS) -> str:
    """`tokens` tokens sampled (``TEMPERATURE``, ``TOP_K``: the sample command's) after the first
    token of the validation split, from a generator seeded by the run's seed and the step (the same
    text for every rerun)."""
    rng = np.random.default_rng([seed, step])
    ids = generate_beyond_context(model, task.split_ids()[1][:1], tokens, temperature=TEMPERATURE,
                                  top_k=TOP_K, rng=rng)
    return task.tokenizer.decode(ids[1:].tolist())


def loss_units(loss: float, task: TextTask, windows: int) -> str:
    """A validation loss with its unit: '1.2400 nats per character' for a character run; for a BPE
    run per token and per character, '2.9000 nats per token = 0.7250 nats per character (4.0
    characters per token)', so runs of either tokenizer compare."""
    if isinstance(task.tokenizer, CharTokenizer):
        return f"{loss:.4f} nats per character"
    chars = characters_per_token(task, windows)
    return (f"{loss:.4f} nats per token = {loss / chars:.4f} nats per character ({chars:.2f} characters "
            f"per token)")
