"""Training a TinyTransformer on the toy tasks: the config, the loop, Ctrl-C handling, held-out
accuracy, a run saved and read back with its random state, checkpoints, the run folder, plots and
the host-memory setting the train command uses. No printing: the commands report.

The names a script needs are here: ``from tinygrad_attn.training import TrainConfig, train``.
"""

from .config import TrainConfig, config_from_dict
from .interrupts import InterruptedMidStep
from .loop import DivergedError, History, StepOutOfMemory, TrainState, make_model, train
from .saved_run import Run, load_run, run_contents, save_run
from .tasks import accuracy, answer

__all__ = ["DivergedError", "History", "InterruptedMidStep", "Run", "StepOutOfMemory", "TrainConfig",
           "TrainState", "accuracy", "answer", "config_from_dict", "load_run", "make_model", "run_contents",
           "save_run", "train"]
