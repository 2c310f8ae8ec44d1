"""Every ```python block in docs/*.md and CONTRIBUTING.md runs: each page's blocks in order, in a
fresh namespace; the commands the pages give exist."""

import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(DOCS.glob("*.md"))
CONTRIBUTING = DOCS.parent / "CONTRIBUTING.md"


def test_pages_with_code_exist():
    names = {p.name for p in PAGES}
    assert {"softmax.md", "cross_entropy.md", "layer_norm.md", "attention.md",
            "flash_attention.md", "stepper.md", "architecture.md", "worked_example.md", "scaling.md",
            "multi_head.md", "mistakes.md", "README.md"} <= names


def test_learning_path_links_every_page_and_each_exists():
    """docs/README.md orders the pages as lessons: every page is in it, every link resolves."""
    path = (DOCS / "README.md").read_text()
    links = re.findall(r"\]\(([\w.]+\.md)\)", path)
    assert {p.name for p in PAGES} - {"README.md"} <= set(links)
    assert all((DOCS / link).is_file() for link in links)
    for script in re.findall(r"examples/([\w.]+\.py)", path):
        assert (DOCS.parent / "examples" / script).is_file(), script


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


@pytest.mark.parametrize("page", [*PAGES, CONTRIBUTING], ids=lambda p: p.name)
def test_every_block_checks_something(page):
    """A block that only runs proves little: each must assert a value."""
    for i, block in enumerate(python_blocks(page)):
        assert "assert " in block, f"{page.name} block {i} has no assert"


@pytest.mark.parametrize("page", [*PAGES, CONTRIBUTING], ids=lambda p: p.name)
def test_code_blocks_run(page, capsys):
    blocks = python_blocks(page)
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{page.name} block {i}", "exec"), namespace)


def test_every_op_file_is_described_and_no_file_that_is_gone():
    """docs/ops.md (generated: a new file needs no line by hand) and the layout table in
    architecture.md together describe each file under tinygrad_attn/ops/; neither names a file
    that is gone."""
    def named(page):
        return set(re.findall(r"\| `ops/(\w+\.py)` \|", (DOCS / page).read_text()))
    present = {p.name for p in (DOCS.parent / "tinygrad_attn" / "ops").glob("*.py")}
    assert present <= named("ops.md") | named("architecture.md")
    assert named("ops.md") | named("architecture.md") <= present


def test_architecture_names_every_module_of_the_package():
    """Each module at the package's root and in its wings (guards/, viz/, training/), but __init__ and
    __main__, is named by its path in the layout table."""
    section = (DOCS / "architecture.md").read_text().split("## Layout", 1)[1]
    table = next(block for block in section.split("\n\n") if block.startswith("| file |"))
    listed = set(re.findall(r"`([\w/]+\.py)`", table))
    package = DOCS.parent / "tinygrad_attn"
    present = {str(p.relative_to(package)) for pattern in ("*.py", "guards/*.py", "viz/*.py", "training/*.py")
               for p in package.glob(pattern) if not p.name.startswith("__")}
    assert present - listed == set()


def test_every_figure_in_docs_is_made_by_a_command_its_page_names():
    """Each picture under docs/img/ is shown by a page that also gives the command writing it."""
    for image in sorted((DOCS / "img").glob("*.png")):
        showing = [p for p in PAGES if f"](img/{image.name})" in p.read_text()]
        assert showing, f"no page shows {image.name}"
        assert any(re.search(rf"python examples/\w+\.py [^`\n]*docs/img/{image.name}", p.read_text())
                   for p in showing), f"no page showing {image.name} names the command that makes it"


def test_the_download_commands_are_those_of_the_current_huggingface_hub():
    """real_model.md's `hf …` lines name a command and options today's `hf` has (huggingface_hub
    removed `huggingface-cli` in 1.0), and no page still gives `huggingface-cli`."""
    pytest.importorskip("huggingface_hub", reason="installed with the test extra (transformers)")
    assert not [p.name for p in PAGES if re.search(r"^huggingface-cli ", p.read_text(), re.M)]
    lines = re.findall(r"^hf (\w+) (.*)$", (DOCS / "real_model.md").read_text(), re.M)
    assert len(lines) == 2
    for command, rest in lines:
        done = subprocess.run([sys.executable, "-m", "huggingface_hub.cli.hf", command, "--help"],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"hf {command}: {done.stderr}"
        for option in re.findall(r"--[\w-]+", rest):
            assert option in done.stdout, f"hf {command} has no {option}"
