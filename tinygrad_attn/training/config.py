"""``TrainConfig``: everything that decides a training run besides the task, checked when made."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..backend import DEVICES
from ..nn import TransformerConfig

if TYPE_CHECKING:
    from .task import Task

__all__ = ["ARCHS", "ConfigError", "TrainConfig", "config_from_dict"]

ARCHS = ("default", "llama")        # the kinds of model a run trains (TrainConfig.model_for)


class ConfigError(ValueError):
    """One TrainConfig field that cannot work: ``field``, and ``problem`` (what is wrong with its
    value, in words that follow the field's name), so that the ``train`` command can name its flag."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"TrainConfig: {field} {problem}")
        self.field, self.problem = field, problem


def _setting(default: Any, meaning: str) -> Any:
    """A TrainConfig field: its default, and what it means (the help of its command-line flag)."""
    return field(default=default, metadata={"help": meaning})


@dataclass
class TrainConfig:
    """Everything that decides a run besides the task; checked when made (see `validate`).

    The defaults reach the README's accuracy targets on every task in under 30 seconds on a
    2-core CPU; a task's own (``Task.defaults``) apply with ``TrainConfig.for_task``. Each
    setting says what it means in its metadata; the ``train`` command makes one flag of each
    (``--batch-size``), with that text as its help. ``model`` is no setting: it is the
    ``TransformerConfig`` those settings give for the task (``for_task`` fills it in), which a
    checkpoint keeps and the run's model is built from.

    Example:
        >>> TrainConfig(steps=10).steps
        10
        >>> dataclasses.fields(TrainConfig)[0].metadata["help"]
        'optimizer steps in all'
    """

    steps: int = _setting(1000, "optimizer steps in all")
    batch_size: int = _setting(64, "sequences per step")
    lr: float = _setting(3e-3, "peak learning rate (linear warmup, then cosine decay)")
    warmup: int = _setting(100, "warmup steps")
    min_lr: float = _setting(1e-4, "learning rate at the end of the cosine decay, at most lr (a lower "
                                   "--lr alone lowers it too)")
    weight_decay: float = _setting(0.01, "AdamW's decoupled weight decay")
    clip: float = _setting(1.0, "largest gradient norm; a larger gradient is scaled down to it")
    d_model: int = _setting(64, "model width")
    num_heads: int = _setting(4, "attention heads per layer")
    num_layers: int = _setting(2, "transformer blocks")
    dropout: float = _setting(0.0, "dropout probability")
    seed: int = _setting(0, "seeds the initial weights and the training batches")
    device: str = _setting("cpu", "cpu (NumPy) or cuda (CuPy)")
    eval_size: int = _setting(500, "held-out prompts for the final accuracy (text: validation windows)")
    eval_every: int = _setting(250, "text: steps between validation losses, each with a sample")
    arch: str = _setting("default", "default (LayerNorm, GELU MLP, learned positions) or llama (RMSNorm, "
                                    "SwiGLU, RoPE, half as many key/value heads as query heads, no "
                                    "LM-head bias)")
    model: TransformerConfig | None = None

    @classmethod
    def for_task(cls, task: Task, **settings: Any) -> TrainConfig:
        """The config of a run of `task`: TrainConfig's defaults, then the task's, then `settings`
        (see ``changed``), with ``model`` made for the task (``with_model_for``).

        Example:
            >>> from tinygrad_attn.training.tasks import get_task
            >>> config = TrainConfig.for_task(get_task("add"), d_model=32)
            >>> config.steps, config.model.d_model, config.model.max_len       # add: 8 + 5 tokens
            (3000, 32, 13)
        """
        return cls(**task.defaults).changed(**settings).with_model_for(task)

    def with_model_for(self, task: Task) -> TrainConfig:
        """This config with ``model``: the one its settings give for `task` (``model_for``)."""
        return dataclasses.replace(self, model=self.model_for(task.vocab_size, task.max_len))

    def changed(self, **settings: Any) -> TrainConfig:
        """This config with `settings` changed; an lr below the min_lr in force lowers min_lr to
        it too, unless min_lr is among them (then a min_lr above lr is refused)."""
        if "lr" in settings and "min_lr" not in settings and settings["lr"] < self.min_lr:
            settings = {**settings, "min_lr": settings["lr"]}
        return dataclasses.replace(self, **settings)

    def model_for(self, vocab_size: int, max_len: int) -> TransformerConfig:
        """The model `arch`, `d_model`, `num_heads`, `num_layers` and `dropout` describe, for a
        vocabulary and a longest sequence: "llama" has RMSNorm, a SwiGLU MLP, rotary positions,
        half as many key/value heads as query heads (one for an odd number) and no LM-head bias,
        as Llama's (so that a run exports as a Hugging Face llama folder), but keeps biases on the
        attention projections, as its runs always had."""
        sizes: dict[str, Any] = dict(d_model=self.d_model, num_heads=self.num_heads,
                                     num_layers=self.num_layers, max_len=max_len, dropout=self.dropout)
        if self.arch == "llama":
            kv_heads = self.num_heads // 2 if self.num_heads % 2 == 0 else 1
            return TransformerConfig.llama(vocab_size, **sizes, n_kv_heads=kv_heads, attn_bias=True)
        return TransformerConfig(vocab_size, **sizes)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first field that cannot work: a ConfigError where one
        field's value alone is wrong."""
        for name in ("steps", "batch_size", "d_model", "num_heads", "num_layers", "eval_size", "eval_every"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be at least 1, got {getattr(self, name)}")
        if self.d_model % self.num_heads:
            raise ValueError(f"TrainConfig: d_model {self.d_model} is not divisible by num_heads "
                             f"{self.num_heads}")
        for name in ("lr", "min_lr", "weight_decay", "clip", "dropout"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigError(name, f"must be a finite number, got {getattr(self, name)}")
        for name, holds, need in (("dropout", 0.0 <= self.dropout < 1.0, "must be in [0, 1)"),
                                  ("lr", self.lr > 0, "must be above 0"),
                                  ("clip", self.clip > 0, "must be above 0"),
                                  ("warmup", self.warmup >= 0, "must be 0 or more"),
                                  ("min_lr", self.min_lr >= 0, "must be 0 or more"),
                                  ("weight_decay", self.weight_decay >= 0, "must be 0 or more"),
                                  ("seed", self.seed >= 0, "must be 0 or more")):
            if not holds:
                raise ConfigError(name, f"{need}, got {getattr(self, name)}")
        if self.min_lr > self.lr:
            raise ValueError(f"TrainConfig: min_lr {self.min_lr:g} is above lr {self.lr:g}; the cosine "
                             f"decays from lr down to min_lr, so min_lr must be at most lr")
        if self.device not in DEVICES:
            raise ValueError(f"TrainConfig: unknown device {self.device!r}: expected one of {DEVICES}")
        if self.arch not in ARCHS:
            raise ValueError(f"TrainConfig: unknown arch {self.arch!r}: expected one of {ARCHS}")
        if self.model is not None:
            described = self.model_for(self.model.vocab_size, self.model.max_len)
            if self.model != described:
                differ = [f"{f.name} {getattr(self.model, f.name)!r}, not {getattr(described, f.name)!r}"
                          for f in dataclasses.fields(described)
                          if getattr(self.model, f.name) != getattr(described, f.name)]
                raise ValueError(f"TrainConfig: model is not the one arch={self.arch!r}, "
                                 f"d_model={self.d_model}, num_heads={self.num_heads}, "
                                 f"num_layers={self.num_layers} and dropout={self.dropout} describe (it "
                                 f"has {', '.join(differ)})")


def config_from_dict(values: dict[str, Any]) -> TrainConfig:
    """A TrainConfig from a dict such as ``dataclasses.asdict(config)``; unknown keys raise."""
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    if set(values) - known:
        raise ValueError(f"TrainConfig: unknown fields {sorted(set(values) - known)}")
    model = values.get("model")
    return TrainConfig(**{**values, "model": None if model is None else TransformerConfig(**model)})
