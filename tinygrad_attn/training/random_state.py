"""A run's random state: the training-batch stream and the library generator (dropout's draws)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..creation import generator

if TYPE_CHECKING:
    from .loop import TrainState

__all__ = ["restore_rng_states", "rng_states"]


def rng_states(state: TrainState) -> dict[str, Any]:
    """The data stream's and the library generator's (dropout's) states, JSON-serialisable."""
    return {"data": state.data_rng.bit_generator.state, "library": generator().bit_generator.state}


def restore_rng_states(state: TrainState, states: dict[str, Any]) -> None:
    """Put back the generator states that `rng_states` returned."""
    state.data_rng.bit_generator.state = states["data"]
    generator().bit_generator.state = states["library"]
