"""Training a TinyTransformer on a task (the toy tasks, or a text): the config, the run (its
checkpoints, resume and evaluation), the loop, Ctrl-C handling, the run folder, plots and the
host-memory setting the train command uses. No printing: the commands report.

The names a script needs are here: ``from tinygrad_attn.training import Run, TrainConfig``.
"""

from .config import TrainConfig, config_from_dict
from .interrupts import InterruptedMidStep
from .loop import DivergedError, History, StepOutOfMemory, TrainState, make_model, train
from .run import Run
from .sample_options import SampleOptions
from .task import Evaluation, Task
from .tasks import accuracy, answer, get_task
from .text_task import TextTask

__all__ = ["DivergedError", "Evaluation", "History", "InterruptedMidStep", "Run", "SampleOptions",
           "StepOutOfMemory", "Task", "TextTask", "TrainConfig", "TrainState", "accuracy", "answer",
           "config_from_dict", "get_task", "make_model", "train"]
