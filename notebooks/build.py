"""Build the lesson notebooks from the lesson pages: docs/NAME.md → notebooks/NAME.ipynb.

The pages are the one source of truth: each page's text becomes markdown cells and each of its
```python blocks a code cell (jupytext's Markdown reader), so a notebook runs top to bottom what
the page shows, and the test suite checks that every notebook equals what this script builds
from its page (tests/test_notebooks.py). Edit the page, then run:

    python notebooks/build.py

Links to other pages point at their notebooks, and pictures at docs/img/.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
DOCS, NOTEBOOKS = ROOT / "docs", ROOT / "notebooks"
# The pages a learner reads in the lessons of docs/README.md (its "read" column), in lesson order;
# ops.md is a generated table and has no notebook.
LESSON_PAGES = ("how_the_engine_works", "stepper", "softmax", "cross_entropy", "layer_norm",
                "gradient_checking", "attention", "worked_example", "scaling", "multi_head",
                "modern_attention", "real_model", "mistakes", "flash_attention", "language_model")


# The first code cell: the repository root as the working folder (pages read examples/ and
# docs/img/), and one BLAS thread (a matrix product split over threads sums in another order).
FIRST_CELL = """import os
if os.path.basename(os.getcwd()) == "notebooks":
    os.chdir("..")
try:                        # one BLAS thread: every run prints the same figures
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=1, user_api="blas")
except ImportError:         # pip install threadpoolctl; without it, BLAS keeps its default threads
    pass"""


def build(page: str) -> nbformat.NotebookNode:
    """The notebook of docs/`page`.md, with stable cell ids (so a rebuild changes no byte)."""
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\((\w+)\.md\)", lambda m: f"]({m.group(1)}.ipynb)" if m.group(1) in LESSON_PAGES
                  else f"](../docs/{m.group(1)}.md)", text)
    text = text.replace("](img/", "](../docs/img/")
    notebook = jupytext.reads(text, fmt="md")
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell(
        f"*This notebook is built from [docs/{page}.md](../docs/{page}.md) by `notebooks/build.py`: "
        "edit the page, not the notebook. Run it from the repository root's `notebooks/` folder "
        "or the root itself; the first cell makes the root the working folder and limits BLAS to one "
        "thread (threadpoolctl, in the dev extra), so that every run prints the same figures.*"))
    notebook.cells.insert(1, nbformat.v4.new_code_cell(FIRST_CELL))
    notebook.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                         "language_info": {"name": "python"}}
    for number, cell in enumerate(notebook.cells):
        cell.id = f"{page}-{number}"
        cell.metadata = {}
    return notebook


def text_of(page: str) -> str:
    """The .ipynb file's text for `page`, as written to notebooks/."""
    return nbformat.writes(build(page)) + "\n"


def main() -> None:
    for page in LESSON_PAGES:
        path = NOTEBOOKS / f"{page}.ipynb"
        path.write_text(text_of(page), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
