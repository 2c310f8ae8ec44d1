"""Build the lesson notebooks from the lesson pages, and run them: docs/NAME.md → notebooks/NAME.ipynb.

The pages are the one source of truth: each page's text becomes markdown cells and each of its
```python blocks a code cell (jupytext's Markdown reader), so a notebook runs top to bottom what
the page shows. Each notebook is then run in a fresh Jupyter kernel, as a learner who opens it
and runs every cell would, and stored with what its cells printed and drew, so that it reads on a
code host without being run. The test suite checks that every notebook's cells are what this
script builds from its page, and that a fresh run prints what the stored outputs say
(tests/docs/test_notebooks.py). Edit the page, then run:

    python notebooks/build.py              # every notebook
    python notebooks/build.py softmax      # the notebooks of the pages named

Links to other pages point at their notebooks, and pictures at docs/img/.
"""

from __future__ import annotations

import argparse
import copy
import re
from pathlib import Path

import jupytext
import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
DOCS, NOTEBOOKS = ROOT / "docs", ROOT / "notebooks"
# The pages a learner reads in the lessons of docs/README.md (its "read" column), in lesson order;
# ops.md is a generated table and has no notebook.
LESSON_PAGES = ("how_the_engine_works", "stepper", "softmax", "cross_entropy", "layer_norm",
                "gradient_checking", "attention", "worked_example", "scaling", "multi_head",
                "modern_attention", "real_model", "mistakes", "flash_attention", "language_model", "kernels")
METADATA = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}
CELL_TIMEOUT = 600          # seconds one cell may run
_KERNEL_FILE = re.compile(r"(ipykernel_)\d+")      # ipykernel's folder for the code of a cell: per process


# The first code cell: the repository root as the working folder (pages read examples/ and
# docs/img/), and one BLAS thread, as the examples have (a matrix product split over threads sums
# in another order), saying so.
FIRST_CELL = """import os
import sys
if os.path.basename(os.getcwd()) == "notebooks":
    os.chdir("..")
sys.path.insert(0, os.path.abspath("examples"))
from blas_threads import one_blas_thread
print(one_blas_thread())"""


def build(page: str) -> nbformat.NotebookNode:
    """The notebook of docs/`page`.md, not yet run, with stable cell ids (so a rebuild changes no byte)."""
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\((\w+)\.md\)", lambda m: f"]({m.group(1)}.ipynb)" if m.group(1) in LESSON_PAGES
                  else f"](../docs/{m.group(1)}.md)", text)
    text = text.replace("](img/", "](../docs/img/")
    notebook = jupytext.reads(text, fmt="md")
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell(
        f"*This notebook is built from [docs/{page}.md](../docs/{page}.md) by `notebooks/build.py`, "
        "which also runs it and stores what each cell printed and drew: edit the page, not the "
        "notebook. Run it from the repository root's `notebooks/` folder or the root itself; the "
        "first cell makes the root the working folder and limits BLAS to one thread "
        "(`examples/blas_threads.py`, with threadpoolctl from the dev extra), so that every run "
        "prints the same figures.*"))
    notebook.cells.insert(1, nbformat.v4.new_code_cell(FIRST_CELL))
    notebook.metadata = copy.deepcopy(METADATA)
    for number, cell in enumerate(notebook.cells):
        cell.id = f"{page}-{number}"
        cell.metadata = {}
    return notebook


def run(notebook: nbformat.NotebookNode, kernel_manager=None) -> nbformat.NotebookNode:
    """`notebook` run top to bottom (in place, and returned) in a fresh kernel started at the
    repository root, or in `kernel_manager`'s kernel; then `tidy`. Raises nbclient's
    CellExecutionError, naming the cell, if a cell fails."""
    nbclient.NotebookClient(notebook, km=kernel_manager, timeout=CELL_TIMEOUT, kernel_name="python3",
                            record_timing=False, resources={"metadata": {"path": str(ROOT)}}).execute()
    return tidy(notebook)


def tidy(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """What a run adds that is not a cell's output taken out (the kernel's version, timings), and
    what changes from run to run made the same: the code cells numbered 1, 2, … in order (one
    kernel may have run other notebooks before), a cell's printout in one piece per stream (the
    kernel sends it in pieces as it is printed), and the kernel's process id in the file name of
    a cell's code (``/tmp/ipykernel_<pid>/…``, in a message that says where a tensor was made)."""
    notebook.metadata = copy.deepcopy(METADATA)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code, start=1):
        cell.metadata = {}
        cell.execution_count = number
        outputs = []
        for output in cell.outputs:
            if output.output_type == "stream":
                output.text = _KERNEL_FILE.sub(r"\1<pid>", output.text)
                if outputs and outputs[-1].output_type == "stream" and outputs[-1].name == output.name:
                    outputs[-1].text += output.text
                    continue
            if "execution_count" in output:
                output.execution_count = number
            output.get("metadata", {}).clear()
            outputs.append(output)
        cell.outputs = outputs
    return notebook


def without_outputs(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of `notebook` as `build` makes it: no outputs, no execution counts."""
    bare = copy.deepcopy(notebook)
    for cell in bare.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return bare


def text_of(notebook: nbformat.NotebookNode) -> str:
    """The .ipynb file's text of `notebook`, as written to notebooks/."""
    return nbformat.writes(notebook) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", metavar="PAGE",
                        help=f"the pages to build (default: every one): {', '.join(LESSON_PAGES)}")
    pages = parser.parse_args().pages or LESSON_PAGES
    unknown = sorted(set(pages) - set(LESSON_PAGES))
    if unknown:
        parser.error(f"no lesson page {', '.join(unknown)}: the pages are {', '.join(LESSON_PAGES)}")
    for page in pages:
        path = NOTEBOOKS / f"{page}.ipynb"
        path.write_text(text_of(run(build(page))), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
