"""The checker's child process: ``python -m tinygrad_attn.exercises.child FILE FD NAME`` imports the
learner's FILE and runs exercise NAME's cases on it, writing one JSON line per event to the pipe FD:
``{"ready": true}`` once started (the solution's time limit begins there), then for each case
``{"start": n}``, then ``{"passed": n, "results": …}``, ``{"fail": n, "message": …}`` or
``{"missing": n, …}``. The parent (``checker.py``) reads them and never trusts one for a pass: it
compares the arrays sent with the true ones it computes itself.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .cases import EXERCISES, Results, exercise_cases

__all__ = ["describe_error", "encode_results", "error_message", "failing_function", "load", "run_child"]


def load(path: Path) -> ModuleType:
    """Import the learner's file as a fresh module (it is their own code)."""
    spec = importlib.util.spec_from_file_location(f"exercise_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path.name} is not a Python file that can be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def encode_results(results: Results) -> dict[str, dict[str, list]]:
    """The arrays as JSON: float64 values (NaN and ±inf as JSON's NaN and Infinity) and a shape."""
    encoded = {}
    for key, array in results.items():
        array = np.asarray(array, dtype=np.float64)
        encoded[key] = {"shape": list(array.shape), "values": array.ravel().tolist()}
    return encoded


def describe_error(error: BaseException) -> str:
    """'TypeError: message' for an exception of the learner's code ('KeyboardInterrupt' when it
    has no message)."""
    text = error_message(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def error_message(error: BaseException) -> str:
    """str(error), also when the learner's exception cannot make one (a __str__ that raises)."""
    try:
        return str(error)
    except BaseException as inner:          # noqa: B036 - their __str__ may raise anything
        return f"(its message could not be shown: str() raised {type(inner).__name__})"


def failing_function(error: BaseException, path: Path) -> str:
    """The learner's function that raised `error` (the last frame in their file), as
    'Softmax.backward (line 30)' or 'online_update (line 29)'."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).resolve() == path]
    if not frames:
        return "your code"
    line = frames[-1].lineno or 0
    qualified = _qualified_names(path).get(line, frames[-1].name)
    return f"{qualified} (line {line})"


def _qualified_names(path: Path) -> dict[int, str]:
    """Line number → 'Class.method' or 'function' for each line of a function in the file."""
    import ast

    names: dict[int, str] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    names[line] = f"{prefix}{child.name}"
    walk(ast.parse(path.read_text()), "")
    return names


def run_child(path: Path, report: int | str | Path, name: str) -> None:
    """Import the learner's file and run every case, writing one JSON line per event to `report`
    (a pipe's file descriptor, or a file): what the parent reads, never trusts for a pass."""
    with open(report, "w", buffering=1, encoding="utf-8") as out:
        def send(**entry: Any) -> None:
            out.write(json.dumps(entry) + "\n")
            out.flush()
        send(ready=True)                            # started: the solution's time limit begins
        try:
            module = load(path)
        except BaseException as error:              # noqa: B036 - the learner's file: anything is theirs
            send(error=f"your file could not be imported: {describe_error(error)}")
            return
        attribute = EXERCISES[name].attribute
        if name != "scalar_engine" and not hasattr(module, attribute):
            send(error=f"your file defines no {attribute}: the exercise asks you to complete it")
            return
        target = module if name == "scalar_engine" else getattr(module, attribute)
        with np.errstate(all="ignore"):
            for number, case in enumerate(exercise_cases(name), start=1):
                send(start=number, description=case.description)
                try:
                    problem, results = case.run(target)
                    encoded = encode_results(results)
                except NotImplementedError as error:
                    send(missing=number, function=failing_function(error, path), message=error_message(error))
                    return
                except BaseException as error:      # noqa: B036 - the learner's code, also sys.exit, Ctrl-C
                    where = failing_function(error, path)
                    exits = " (a solution must not call sys.exit())" if isinstance(error, SystemExit) else ""
                    send(fail=number, message=f"{where} raised {describe_error(error)}{exits}")
                    return
                if problem is not None:
                    send(fail=number, message=problem)
                    return
                send(passed=number, results=encoded)


if __name__ == "__main__":
    run_child(Path(sys.argv[1]).resolve(), int(sys.argv[2]), sys.argv[3])
