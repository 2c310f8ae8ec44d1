"""The exercises of ``exercises/NN_name.py`` (at the repository's root) and their checker: what
each exercise asks for and its cases (``cases.py``), and `check_file`, which runs a learner's
solution in a process of its own (``child.py``) and compares what it computed with the true values
(``checker.py``). The ``tinygrad-attn check`` command prints what `check_file` returns.
"""

from .checker import ExerciseFileError, Outcome, check_file

__all__ = ["ExerciseFileError", "Outcome", "check_file"]
