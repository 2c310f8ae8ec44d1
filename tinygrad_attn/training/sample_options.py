"""What ``tinygrad-attn sample``'s flags ask of a task (``Task.reply``): ``SampleOptions``, the
sampling a text does where they are left out, and ``SamplingNote``, the warning for a flag that
does something other than it seems.

Example:
    >>> SampleOptions(temperature=0.5, seed=1).given()
    ['--temperature', '--seed']
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["MAX_NEW_TOKENS", "TEMPERATURE", "TOP_K", "SampleOptions", "SamplingNote"]

# A text's sampling, when the options leave it out.
MAX_NEW_TOKENS, TEMPERATURE, TOP_K = 300, 0.8, 20


class SamplingNote(UserWarning):
    """An option that does something other than it seems: a temperature too small to divide the
    logits by is greedy."""


@dataclass(frozen=True)
class SampleOptions:
    """How a text continues a prompt; None means not given (a text takes ``MAX_NEW_TOKENS``,
    ``TEMPERATURE`` and ``TOP_K`` and a fresh seed; a toy task answers greedily and takes none).

    Attributes:
        max_new_tokens: tokens to write after the prompt.
        temperature: divides the logits before the softmax; 0 always takes the most likely token.
        top_k: the most likely tokens that are sampled among.
        seed: seeds the sampling, so the same seed writes the same text.
    """

    max_new_tokens: int | None = None
    temperature: float | None = None
    top_k: int | None = None
    seed: int | None = None

    def given(self) -> list[str]:
        """The options given, as their flags ("--max-new-tokens", …), in the order above."""
        return ["--" + f.name.replace("_", "-") for f in fields(self) if getattr(self, f.name) is not None]
