"""The lesson notebooks: each is exactly what notebooks/build.py makes from its page (so pages and
notebooks cannot drift apart), and each runs top to bottom in a Jupyter kernel (nbclient).

Starting a kernel per notebook costs seconds each, so the notebooks run one after another in
one kernel, its namespace cleared (``%reset -f``) before each: as test_docs runs the pages' blocks
in one process with a fresh namespace per page.
"""

import gc
import importlib.util
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
jupytext = pytest.importorskip("jupytext", reason="the notebook tests need the dev extra: "
                               "python -m pip install -e '.[dev]'")
nbformat = pytest.importorskip("nbformat", reason="python -m pip install -e '.[dev]'")
nbclient = pytest.importorskip("nbclient", reason="python -m pip install -e '.[dev]'")


def load_build():
    spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = load_build()


def test_every_lesson_page_has_a_notebook_and_only_those():
    table = "\n".join(line for line in (ROOT / "docs" / "README.md").read_text().splitlines()
                      if re.match(r"\| \d+ \|", line))                  # the lessons' rows
    read = set(re.findall(r"\]\((\w+)\.md\)", table)) - {"ops"}      # ops.md: a generated table
    assert read == set(build.LESSON_PAGES)
    assert {p.stem for p in NOTEBOOKS.glob("*.ipynb")} == set(build.LESSON_PAGES)


@pytest.mark.parametrize("page", build.LESSON_PAGES)
def test_notebook_is_what_its_page_builds(page):
    committed = (NOTEBOOKS / f"{page}.ipynb").read_text(encoding="utf-8")
    assert committed == build.text_of(page), \
        f"notebooks/{page}.ipynb differs from docs/{page}.md: run python notebooks/build.py"


def test_a_changed_page_is_noticed(tmp_path, monkeypatch):
    """The drift check can fail: a page edited after its notebook was built gives other text."""
    before = build.text_of("softmax")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "softmax.md").write_text((ROOT / "docs" / "softmax.md").read_text() + "\nOne more line.\n")
    monkeypatch.setattr(build, "DOCS", docs)
    assert build.text_of("softmax") != before


@pytest.mark.slow
def test_every_notebook_runs_top_to_bottom():
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import start_new_kernel

    if "python3" not in KernelSpecManager().find_kernel_specs():
        pytest.skip("no 'python3' Jupyter kernel: python -m pip install ipykernel "
                    "(or python -m ipykernel install --user)")
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    shown: dict[str, list[set[str]]] = {}
    try:
        for page in build.LESSON_PAGES:
            notebook = nbformat.read(NOTEBOOKS / f"{page}.ipynb", as_version=4)
            fresh = f"%reset -f\nimport os\nos.chdir({str(ROOT)!r})"          # a clean namespace, at the root
            notebook.cells.insert(0, nbformat.v4.new_code_cell(fresh))
            _run(notebook, page, manager)
            assert all(o.get("output_type") != "error" for c in notebook.cells for o in c.get("outputs", []))
            shown[page] = _displayed(notebook.cells)[2:]            # after the fresh-start and chdir cells
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        # Each NotebookClient leaves its channels' zmq sockets to the garbage collector, which
        # warns (ResourceWarning) whenever it next runs: collect them here, so that the warning
        # cannot surface in a later test of this process that turns warnings into errors.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


    # Every cell a learner runs shows what it computed (numbers, a picture, the explorer), as
    # micrograd's notebooks do; the assertions stay in the cells, quietly.
    for page, cells in shown.items():
        silent = [i for i, kinds in enumerate(cells) if not kinds]
        assert not silent, f"notebooks/{page}.ipynb: code cells {silent} display nothing"
    pictures = {page for page, cells in shown.items() if any("image/png" in kinds for kinds in cells)}
    assert pictures >= {"gradient_checking", "attention", "scaling", "modern_attention", "mistakes"}
    for page in ("how_the_engine_works", "stepper"):              # the explorer, inline
        assert any("text/html" in kinds for kinds in shown[page])


def _displayed(cells) -> list[set[str]]:
    """Per code cell, what it showed: 'stream' for printed text, else the MIME types displayed."""
    kinds = []
    for cell in cells:
        if cell.cell_type != "code":
            continue
        shown = set()
        for output in cell.get("outputs", []):
            shown |= {"stream"} if output["output_type"] == "stream" else set(output.get("data", {}))
        kinds.append(shown)
    return kinds


def test_the_failing_gradcheck_report_and_the_epsilon_table_are_in_their_pages():
    """What the gradient-checking notebook prints comes from its page's cells (built, not typed)."""
    page = (ROOT / "docs" / "gradient_checking.md").read_text()
    assert 'print(experiment["epsilon_table"](errors))' in page and "print(report)" in page


def _run(notebook, page: str, manager) -> None:
    """Execute `notebook` in the kernel of `manager`, failing the test with the cell's error."""
    runner = nbclient.NotebookClient(notebook, km=manager, timeout=600, kernel_name="python3")
    try:
        runner.execute()
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"notebooks/{page}.ipynb: {str(error)[:2000]}")
