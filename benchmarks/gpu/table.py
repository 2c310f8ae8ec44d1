"""The table ``python -m benchmarks.gpu`` prints: a Markdown line per Line of each measured row,
with both sides' figures, the two ratios and whether each target is met."""

from __future__ import annotations

from ..harness import markdown, ms
from .measure import Measured
from .rows import Line, Row, Target
from .runtimes import Peak

__all__ = ["HEAD", "format_table", "line_cells", "size"]

HEAD = ("workload", "A", "B", "time: B / A", "memory: A / B", "targets")


def size(nbytes: int) -> str:
    """Bytes as GiB, or MiB below one GiB."""
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


def _side(name: str, measured: Measured) -> str:
    """A side's cell: its median step, its peak (and what the step added), its first loss."""
    cell = f"{name}: {ms(measured.timing.median(name))}"
    peak = measured.peaks[name]
    if peak is not None:
        cell += f", peak {size(peak.peak)} (the step: {size(peak.step)})"
    if measured.losses[name] is not None:
        cell += f", loss {measured.losses[name]:.4f}"
    return cell


def _memory(a: Peak | None, b: Peak | None, of: str) -> float | None:
    if a is None or b is None:
        return None
    mine, theirs = (a.peak, b.peak) if of == "peak" else (a.step, b.step)
    return mine / theirs if theirs else None


def _verdicts(checks: list[tuple[str, Target | None, float | None]]) -> list[tuple[str, bool | None]]:
    """Each (what, target, ratio) with a target as its text and whether it is met (None: the
    ratio was not measured)."""
    verdicts = []
    for what, target, ratio in checks:
        if target is not None:
            met = None if ratio is None else target.met(ratio)
            said = {None: "not measured", True: "met", False: "NOT met"}[met]
            verdicts.append((f"{what} {target}: {said}", met))
    return verdicts


def line_cells(line: Line, measured: Measured) -> tuple[tuple[str, ...], list[bool | None]]:
    """The cells of `line` in a row measured as `measured`, and for each of its targets whether it
    is met (None: not measured)."""
    a, b = measured.names[line.a], measured.names[line.b]
    speed = measured.timing.ratio(b, a)
    memory = _memory(measured.peaks[a], measured.peaks[b], line.memory_of)
    verdicts = _verdicts([("time", line.speed, speed), (f"memory ({line.memory_of})", line.memory, memory)])
    memory_cell = "-" if memory is None else f"{memory:.2f} ({line.memory_of})"
    return ((line.label, _side(a, measured), _side(b, measured), f"{speed:.2f}", memory_cell,
             "; ".join(text for text, _ in verdicts)), [met for _, met in verdicts])


def format_table(results: list[tuple[Row, Measured]]) -> str:
    """Every line of every measured row as a Markdown table, then how many targets were met."""
    body, met = [], []
    for row, measured in results:
        for line in row.lines:
            cells, verdicts = line_cells(line, measured)
            body.append(cells)
            met += verdicts
    counted = [v for v in met if v is not None]
    return (markdown(HEAD, body) + f"\ntargets met: {sum(counted)} of {len(counted)}"
            + (f" ({len(met) - len(counted)} not measured)" if len(counted) < len(met) else ""))
