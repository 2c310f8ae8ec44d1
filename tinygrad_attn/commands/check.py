"""``tinygrad-attn check exercises/NN_name.py``: check a learner's solution to one exercise.

The file's name (``NN_name.py``) says which exercise it solves. The solution runs in a child
process (``exercises.py``) with a time limit, which reports each case as it starts and as it
passes; the verdict is read from that report only. So a solution that calls ``sys.exit()``, loops
forever or kills its interpreter is reported as such, never as a pass. Exit code 0: every case
was reported passing; 1: something is not implemented yet, wrong, too slow or ended early;
2: not an exercise file; 130: interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .exercises import EXERCISES, Exercise, case_count

__all__ = ["ExerciseFileError", "add_parser", "check_file", "find_exercise", "run", "verdict"]

HOW = {"online_softmax": "values checked against the whole-row softmax",
       "scalar_engine": "gradients checked against tinygrad_attn's engine",
       "numeric_gradient": "values checked against exact gradients"}


STARTUP_LIMIT = 300.0       # seconds the child may take to start, before the solution's time begins


class ExerciseFileError(Exception):
    """The path is not an exercise file the checker knows (exit code 2)."""


def find_exercise(path: Path) -> tuple[str, Exercise]:
    """The exercise a file solves, from its name: ``03_attention_backward.py`` → attention_backward."""
    if not path.exists():
        raise ExerciseFileError(f"check: {path}: no such file; the exercises are exercises/NN_name.py "
                                f"with name one of: {', '.join(EXERCISES)}")
    if path.suffix != ".py" or not path.is_file():
        raise ExerciseFileError(f"check: {path} is not a Python file")
    match = re.fullmatch(r"\d+_(\w+)", path.stem)
    if match is None or match.group(1) not in EXERCISES:
        raise ExerciseFileError(f"check: {path.name} is not one of the exercises; the file must be named "
                                f"NN_name.py with name one of: {', '.join(EXERCISES)}")
    return match.group(1), EXERCISES[match.group(1)]


def check_file(path: Path, timeout: float = 30.0) -> tuple[int, str]:
    """(exit code, message) for the learner's file at `path`, run in a child process."""
    path = path.resolve()
    name, exercise = find_exercise(path)
    total = case_count(name)
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.jsonl"
        report.touch()
        child = subprocess.Popen([sys.executable, "-m", "tinygrad_attn.commands.exercises",
                                  str(path), str(report), name], start_new_session=True)
        try:
            _wait_until_ready(child, report)
            returncode: int | None = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            returncode = None
        except KeyboardInterrupt:
            child.kill()
            child.wait()
            where = _where(_entries(report), total)
            return 130, f"{path.name}: check interrupted (Ctrl-C){' during ' + where if where else ''}"
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        return verdict(path.name, name, exercise, _entries(report), returncode, timeout)


def _wait_until_ready(child: subprocess.Popen, report: Path) -> None:
    """Wait while the child starts Python and imports NumPy and tinygrad_attn, until it writes its
    first line (before it imports the learner's file), so that `timeout` times the solution only:
    on a busy machine the start alone can take seconds. Raises TimeoutExpired after STARTUP_LIMIT s."""
    deadline = time.monotonic() + STARTUP_LIMIT
    while report.stat().st_size == 0 and child.poll() is None:
        if time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(child.args, STARTUP_LIMIT)
        time.sleep(0.01)


def _entries(report: Path) -> list[dict]:
    """The complete lines of the child's report (a line cut off by a kill is dropped)."""
    lines = report.read_text(encoding="utf-8").split("\n")[:-1]
    return [json.loads(line) for line in lines]


def _where(entries: list[dict], total: int) -> str:
    """'case 3 of 4 (description)' for the last case started, '' before the first."""
    started = [e for e in entries if "start" in e]
    return f"case {started[-1]['start']} of {total} ({started[-1]['description']})" if started else ""


def verdict(file: str, name: str, exercise: Exercise, entries: list[dict], returncode: int | None,
            timeout: float) -> tuple[int, str]:
    """(exit code, message) from what the child reported and how it ended (None: timed out)."""
    total = case_count(name)
    where = _where(entries, total)
    last = entries[-1] if entries else {}
    if "error" in last:
        return 1, last["error"]
    if "missing" in last:
        return 1, (f"{file}: {last['function']} is not implemented yet ({last['message']}).\n"
                   f"  Read {exercise.page}, write it, then run this check again.")
    if "fail" in last:
        return 1, f"{file}: {where} failed:\n  {last['message']}"
    passed = sum("passed" in e for e in entries)
    if returncode is None and not entries:
        return 1, (f"{file}: the checker's process did not start within {STARTUP_LIMIT:g} s (a very busy "
                   f"machine?); your file was not run. Try again.")
    if returncode is None:
        return 1, (f"{file}: {where or 'importing your file'} did not finish within {timeout:g} s "
                   f"(an endless loop?). Give it longer with --timeout SECONDS.")
    if passed == total and returncode == 0:
        return 0, f"{file}: all {total} cases pass ({HOW.get(name, 'gradcheck passed')}). Well done."
    during = f"during {where}" if where and "passed" not in last else \
        f"after {passed} of {total} cases passed" if passed else "while your file was imported"
    return 1, (f"{file}: the checker's process ended {during} with exit code {returncode}, before "
               f"every case was checked; only {passed} of {total} passed. A solution must not call "
               f"sys.exit() or os._exit().")


def run(args: argparse.Namespace) -> int:
    try:
        code, message = check_file(Path(args.path), args.timeout)
    except ExerciseFileError as error:
        print(error, file=sys.stderr)
        return 2
    print(message)
    return code


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("check", help="check your solution to an exercise in exercises/",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="the exercise file, e.g. exercises/01_softmax_backward.py")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds the solution may run for all cases together, from the import of your "
                             "file (default 30)")
    parser.set_defaults(run=run)
