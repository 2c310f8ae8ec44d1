"""Check a learner's solution to one exercise (``exercises/NN_name.py``): `check_file`, what the
``tinygrad-attn check`` command runs.

The file's name (``NN_name.py``) says which exercise it solves. The solution runs in a child
process (``child.py``) in a session of its own, with a time limit counted from the import of
the learner's file; for each case it sends, on a pipe, the arrays the learner's code computed (an
op's output and gradients, a gradient, O and L). The verdict is this process's own: it computes
the true arrays itself and compares. A line
the solution writes on the pipe can say that a case failed, never that it passed; a solution that
exits, hangs, crashes or prints "all cases pass" is reported as such. Whatever the solution
printed is returned with the verdict (`Outcome.printed`). The solution's whole process group is
killed on every way out (done, timed out, Ctrl-C, SIGTERM).

Exit code (`Outcome.code`) 0: every case's arrays are right; 1: something is not implemented yet,
wrong, too slow or ended early; 130: interrupted (Ctrl-C); 128 + the signal's number on SIGTERM or
SIGHUP. A path that is no exercise file is an `ExerciseFileError`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..training.interrupts import Terminated
from .cases import EXERCISES, CheckCase, Exercise, exercise_cases

__all__ = ["ExerciseFileError", "Outcome", "check_file", "find_exercise", "verdict"]

HOW = {"online_softmax": "values checked against the whole-row softmax",
       "scalar_engine": "gradients checked against tinygrad_attn's engine",
       "numeric_gradient": "values checked against exact gradients"}
_KEPT_OUTPUT = 20_000          # characters of the solution's own output shown (the last ones)
_KEPT_REPORT = 10_000_000      # bytes of the child's report read; a solution flooding it gets no more
STARTUP_LIMIT = 300.0       # seconds the child may take to start, before the solution's time begins


class ExerciseFileError(Exception):
    """The path is not an exercise file the checker knows (exit code 2)."""


class Outcome:
    """How a check ended: the exit code, the verdict, and what the solution printed."""

    def __init__(self, code: int, message: str, printed: str = ""):
        self.code, self.message, self.printed = code, message, printed


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


class _Drain(threading.Thread):
    """Reads a pipe to its end in the background (so the child never blocks on a full pipe),
    keeping at most `limit` bytes."""

    def __init__(self, fd: int, limit: int):
        super().__init__(daemon=True)
        self.fd, self.limit, self.data, self.dropped = fd, limit, bytearray(), 0
        self.first_line = threading.Event()     # set at the first newline, or at the end

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 65536):
                room = self.limit - len(self.data)
                self.data += chunk[:max(room, 0)]
                self.dropped += max(len(chunk) - max(room, 0), 0)
                if b"\n" in chunk:
                    self.first_line.set()
        except OSError:
            pass
        finally:
            self.first_line.set()
            os.close(self.fd)


def check_file(path: Path, timeout: float = 30.0) -> Outcome:
    """Check the learner's file at `path`, run in a child process of its own session."""
    path = path.resolve()
    name, exercise = find_exercise(path)
    report_read, report_write = os.pipe()
    try:
        child = subprocess.Popen([sys.executable, "-m", "tinygrad_attn.exercises.child", str(path),
                                  str(report_write), name], pass_fds=(report_write,),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    except BaseException:
        os.close(report_read)
        raise
    finally:
        os.close(report_write)
    report = _Drain(report_read, _KEPT_REPORT)
    assert child.stdout is not None                                     # stdout=PIPE above
    output = _Drain(os.dup(child.stdout.fileno()), _KEPT_OUTPUT * 4)
    child.stdout.close()
    report.start()
    output.start()
    stopped: KeyboardInterrupt | None = None
    returncode: int | None = None
    try:
        _wait_until_ready(child, report)
        returncode = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    except KeyboardInterrupt as stop:       # Ctrl-C, or SIGTERM/SIGHUP (termination_as_interrupt)
        stopped = stop
    finally:
        _kill_group(child)
        report.join(5)
        output.join(5)
    printed = _shown(output)
    entries = _entries(bytes(report.data))
    if stopped is not None:
        how = f"terminated by {stopped}" if isinstance(stopped, Terminated) else "interrupted (Ctrl-C)"
        where = _first_unfinished(name, entries)
        code = 128 + stopped.signum if isinstance(stopped, Terminated) else 130
        return Outcome(code, f"{path.name}: check {how}{' during ' + where if where else ''}", printed)
    code, message = verdict(path.name, name, exercise, entries, returncode, timeout)
    return Outcome(code, message, printed)


def _wait_until_ready(child: subprocess.Popen, report: _Drain) -> None:
    """Wait while the child starts Python and imports NumPy and tinygrad_attn, until it writes its
    first line (before it imports the learner's file), so that the time limit times the solution
    only: on a busy machine the start alone can take seconds. TimeoutExpired after STARTUP_LIMIT s."""
    deadline = time.monotonic() + STARTUP_LIMIT
    while not report.first_line.wait(0.01) and child.poll() is None:
        if time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(child.args, STARTUP_LIMIT)


def _kill_group(child: subprocess.Popen) -> None:
    """Kill the child and every process it started in its session (a forked `sleep` too)."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


def _shown(output: _Drain) -> str:
    """The solution's own output as text, its last _KEPT_OUTPUT characters."""
    text = _visible(bytes(output.data).decode("utf-8", errors="replace").replace("\r\n", "\n"))
    cut = len(text) > _KEPT_OUTPUT or output.dropped
    return ("… (earlier output left out)\n" + text[-_KEPT_OUTPUT:]) if cut else text


def _entries(data: bytes) -> list[dict]:
    """The report's lines that are JSON objects; anything else (a solution's garbage, a line cut
    off by a kill, bytes that are not UTF-8) is skipped."""
    entries = []
    for line in data.split(b"\n"):
        try:
            entry = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _first_unfinished(name: str, entries: list[dict]) -> str:
    """'case 3 of 4 (description)' for the first case without an outcome, '' before any started."""
    if not any(_number(e, "start") for e in entries):
        return ""
    cases = exercise_cases(name)
    for number, case in enumerate(cases, start=1):
        if _outcome(entries, number) is None:
            return f"case {number} of {len(cases)} ({case.description})"
    return ""


def _number(entry: dict, key: str) -> int | None:
    value = entry.get(key)
    return value if type(value) is int else None


def _outcome(entries: list[dict], number: int) -> dict | None:
    """The child's first word on case `number`: passed (with results), fail or missing."""
    return next((e for e in entries if number in (_number(e, "passed"), _number(e, "fail"),
                                                  _number(e, "missing"))), None)


def verdict(file: str, name: str, exercise: Exercise, entries: list[dict], returncode: int | None,
            timeout: float) -> tuple[int, str]:
    """(exit code, message): each case's arrays, as the child sent them, compared with the true
    ones computed here; how the child ended (None: timed out) when it sent no word on a case."""
    cases = exercise_cases(name)
    total = len(cases)
    if returncode is None and not any(e.get("ready") is True for e in entries):
        return 1, (f"{file}: the checker's process did not start within {STARTUP_LIMIT:g} s (a very busy "
                   f"machine?); your file was not run. Try again.")
    error = next((e for e in entries if "error" in e), None)
    if error is not None and not any(_number(e, "start") for e in entries):
        return 1, f"{file}: {_text(error['error'])}"
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {total} ({case.description})"
        outcome = _outcome(entries, number)
        if outcome is None:
            return 1, _ended_early(file, where, number - 1, total, returncode, timeout, started=any(
                _number(e, "start") for e in entries))
        if "missing" in outcome:
            return 1, (f"{file}: {_text(outcome.get('function'))} is not implemented yet "
                       f"({_text(outcome.get('message'))}).\n  Read {exercise.page}, write it, then run this "
                       f"check again.")
        if "fail" in outcome:
            return 1, f"{file}: {where} failed:\n  {_text(outcome.get('message'))}"
        problem = _compare(case, outcome.get("results"))
        if problem is not None:
            return 1, f"{file}: {where} failed:\n  {problem}"
    if returncode != 0:
        how = "did not finish" if returncode is None else _ending(returncode)
        return 1, (f"{file}: every case's values were right, but the checker's process then {how}; "
                   "a solution must not end the process itself.")
    how = HOW.get(name, "gradcheck passed; output and gradients checked against tinygrad_attn's own op")
    return 0, f"{file}: all {total} cases pass ({how}). Well done."


def _text(value: Any) -> str:
    """A message the child sent, made safe to print inside the verdict: control characters
    spelled out (no escape sequence can hide or redraw the checker's lines) and every line after
    the first indented, so that none can pass for one of the checker's own."""
    return _visible(value if isinstance(value, str) else repr(value)).replace("\n", "\n  ")


def _visible(text: str) -> str:
    """`text` with every control character but newline and tab written as an escape (\\x1b)."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", text)


def _ending(returncode: int) -> str:
    """How the child's process ended, in words."""
    if returncode < 0:
        try:
            signame = signal.Signals(-returncode).name
        except ValueError:
            signame = f"signal {-returncode}"
        crash = " (a crash: a segmentation fault, in native code)" if signame == "SIGSEGV" else ""
        return f"was killed by {signame}{crash}"
    return f"ended with exit code {returncode}"


def _ended_early(file: str, where: str, passed: int, total: int, returncode: int | None, timeout: float,
                 started: bool) -> str:
    if returncode is None:
        return (f"{file}: {where if started else 'importing your file'} did not finish within {timeout:g} s "
                f"(an endless loop?). Give it longer with --timeout SECONDS.")
    during = f"during {where}" if started else "while your file was imported"
    advice = " A solution must not call sys.exit() or os._exit()." if returncode >= 0 else ""
    return (f"{file}: the checker's process {_ending(returncode)} {during}, before every case was "
            f"checked; only {passed} of {total} passed.{advice}")


def _compare(case: CheckCase, sent: Any) -> str | None:
    """None when the arrays the child sent for `case` are the true ones, else what differs."""
    expected = case.expected()
    if not isinstance(sent, dict):
        return "the checker's process sent no values for this case (a solution wrote over its report?)"
    for key, want in expected.items():
        want = np.asarray(want, dtype=np.float64)
        got = _decoded(sent.get(key))
        if got is None:
            return f"your code gave no {key} for this case (the true one has shape {want.shape})"
        if got.shape != want.shape:
            return f"your code's {key} has shape {got.shape}; the true one has shape {want.shape}"
        wrong = ~np.isclose(got, want, rtol=case.rtol, atol=case.atol)
        if wrong.any():
            index = tuple(int(i) for i in np.argwhere(wrong)[0])
            return (f"{key}{list(index)} is {got[index]:.10g} from your code, but {want[index]:.10g} as this "
                    f"checker computes it itself")
    return None


def _decoded(record: Any) -> np.ndarray | None:
    """An array sent as {"shape": [...], "values": [...]}, or None if it is not one."""
    try:
        values = np.array(record["values"], dtype=np.float64)
        return values.reshape(tuple(int(n) for n in record["shape"]))
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
