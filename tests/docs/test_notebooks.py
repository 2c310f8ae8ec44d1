"""The lesson notebooks: the cells of each are exactly what notebooks/build.py makes from its page
(so pages and notebooks cannot drift apart); each is stored with what its cells printed and drew,
every code cell showing something; and each, run again top to bottom in a Jupyter kernel
(nbclient), prints what it stores.

Starting a kernel per notebook costs seconds each, so the fresh run runs the notebooks one after
another in one kernel, its namespace cleared (``%reset -f``) before each, as test_docs runs the
pages' blocks in one process with a fresh namespace per page; build.py stores what a fresh kernel
per notebook printed, so the comparison also finds a notebook that leans on an earlier one's state.
"""

import gc
import importlib.util
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


def stored(page: str):
    """The notebook of `page` as stored in notebooks/."""
    return nbformat.read(NOTEBOOKS / f"{page}.ipynb", as_version=4)


def code_cells(notebook) -> list:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_every_lesson_page_has_a_notebook_and_only_those():
    table = "\n".join(line for line in (ROOT / "docs" / "README.md").read_text().splitlines()
                      if re.match(r"\| \d+ \|", line))                  # the lessons' rows
    read = set(re.findall(r"\]\((\w+)\.md\)", table)) - {"ops"}      # ops.md: a generated table
    assert read == set(build.LESSON_PAGES)
    assert {p.stem for p in NOTEBOOKS.glob("*.ipynb")} == set(build.LESSON_PAGES)


@pytest.mark.parametrize("page", build.LESSON_PAGES)
def test_notebook_is_what_its_page_builds(page):
    """The cells of each stored notebook are those its page builds, outputs aside."""
    assert build.text_of(build.without_outputs(stored(page))) == build.text_of(build.build(page)), \
        f"notebooks/{page}.ipynb differs from docs/{page}.md: run python notebooks/build.py {page}"


def test_a_changed_page_is_noticed(tmp_path, monkeypatch):
    """The drift check can fail: a page edited after its notebook was built gives other cells."""
    before = build.text_of(build.build("softmax"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "softmax.md").write_text((ROOT / "docs" / "softmax.md").read_text() + "\nOne more line.\n")
    monkeypatch.setattr(build, "DOCS", docs)
    assert build.text_of(build.build("softmax")) != before


def test_every_stored_notebook_shows_what_its_cells_compute():
    """Stored with its outputs, a notebook reads on a code host without being run: every code cell
    shows what it computed (numbers, a picture, the explorer), as micrograd's notebooks do (the
    assertions stay in the cells, quietly), and none an error; the cells are numbered 1, 2, … as
    one run top to bottom numbers them; its pictures are modest PNGs (the file stays small)."""
    shown = {}
    for page in build.LESSON_PAGES:
        code = code_cells(stored(page))
        assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), page
        assert all(output.output_type != "error" for cell in code for output in cell.outputs), page
        shown[page] = displayed(code)
        silent = [i for i, kinds in enumerate(shown[page]) if not kinds]
        assert not silent, f"notebooks/{page}.ipynb: code cells {silent} show nothing: run notebooks/build.py"
        pictures = [output.data["image/png"] for cell in code for output in cell.outputs
                    if "image/png" in output.get("data", {})]
        assert all(len(picture) < 150_000 for picture in pictures), page    # base64 of 110 KB of PNG
    check_kinds(shown)


def test_a_cell_that_shows_nothing_is_noticed():
    """The check above can fail: a cell stored without its output shows nothing."""
    notebook = build.without_outputs(stored("softmax"))
    assert not any(displayed(code_cells(notebook)))


@pytest.mark.slow
def test_every_notebook_runs_top_to_bottom_and_prints_what_it_stores():
    """Each notebook, run again, shows what its stored outputs say: every printed text and every
    text/plain value alike, and a picture or a page where one is stored (their bytes depend on the
    versions of matplotlib and graphviz, not on the lesson's numbers)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import start_new_kernel

    if "python3" not in KernelSpecManager().find_kernel_specs():
        pytest.skip("no 'python3' Jupyter kernel: python -m pip install ipykernel "
                    "(or python -m ipykernel install --user)")
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    shown: dict[str, list[set[str]]] = {}
    try:
        for page in build.LESSON_PAGES:
            notebook = build.build(page)
            fresh = f"%reset -f\nimport os\nos.chdir({str(ROOT)!r})"          # a clean namespace, at the root
            notebook.cells.insert(0, nbformat.v4.new_code_cell(fresh))
            run(notebook, page, manager)
            notebook.cells.pop(0)
            code = code_cells(build.tidy(notebook))
            assert all(output.output_type != "error" for cell in code for output in cell.outputs)
            shown[page] = displayed(code)
            for number, (now, then) in enumerate(zip(code, code_cells(stored(page)), strict=True), start=1):
                assert comparable(now.outputs) == comparable(then.outputs), \
                    (f"notebooks/{page}.ipynb, code cell {number}: a fresh run shows other outputs than "
                     f"the stored ones: python notebooks/build.py {page}")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        # Each NotebookClient leaves its channels' zmq sockets to the garbage collector, which
        # warns (ResourceWarning) whenever it next runs: collect them here, so that the warning
        # cannot surface in a later test of this process that turns warnings into errors.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
    check_kinds(shown)


def check_kinds(shown: dict[str, list[set[str]]]) -> None:
    """The pages that draw show a picture; the explorer shows inline where its pages call it."""
    pictures = {page for page, cells in shown.items() if any("image/png" in kinds for kinds in cells)}
    assert pictures >= {"gradient_checking", "attention", "scaling", "modern_attention", "mistakes"}
    for page in ("how_the_engine_works", "stepper"):              # the explorer, inline
        assert any("text/html" in kinds for kinds in shown[page])


def displayed(cells) -> list[set[str]]:
    """Per code cell, what it showed: 'stream' for printed text, else the MIME types displayed."""
    kinds = []
    for cell in cells:
        shown = set()
        for output in cell.get("outputs", []):
            shown |= {"stream"} if output["output_type"] == "stream" else set(output.get("data", {}))
        kinds.append(shown)
    return kinds


def comparable(outputs) -> list:
    """A cell's outputs as the comparison sees them: texts whole, pictures and pages by their type."""
    return [(output.name, output.text) if output.output_type == "stream" else
            {kind: value if kind == "text/plain" else kind for kind, value in output.get("data", {}).items()}
            for output in outputs]


def test_the_failing_gradcheck_report_and_the_epsilon_table_are_in_their_pages():
    """What the gradient-checking notebook prints comes from its page's cells (built, not typed)."""
    page = (ROOT / "docs" / "gradient_checking.md").read_text()
    assert 'print(experiment["epsilon_table"](errors))' in page and "print(report)" in page


def run(notebook, page: str, manager) -> None:
    """Execute `notebook` in the kernel of `manager`, failing the test with the cell's error."""
    try:
        build.run(notebook, manager)
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"notebooks/{page}.ipynb: {str(error)[:2000]}")
