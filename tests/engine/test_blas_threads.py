"""The examples and the notebooks set their BLAS threads themselves (one, with threadpoolctl) and
say so, so that the figures they print reproduce the docs' exactly; without threadpoolctl they
say that theirs may differ."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("[0-9][0-9]_*.py"))
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def python(code: str, cwd: Path = ROOT) -> str:
    """Run `code` in a fresh Python without the suite's one-thread variables (as a learner would)."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    paths = [str(ROOT), str(ROOT / "examples"), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=env, cwd=cwd, timeout=120).stdout


BLAS_THREADS = ("from threadpoolctl import threadpool_info\n"
                "print([i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'])")


def test_one_blas_thread_limits_blas_and_says_so():
    out = python("from blas_threads import one_blas_thread\nprint(one_blas_thread())\n" + BLAS_THREADS)
    message, threads = out.splitlines()
    assert message == "BLAS threads: 1 (set by threadpoolctl): every run prints the same figures"
    assert threads.startswith("[1") and set(eval(threads)) == {1}


def test_without_threadpoolctl_it_says_the_figures_may_differ():
    out = python("import sys\nsys.modules['threadpoolctl'] = None\n"
                 "from blas_threads import one_blas_thread\nprint(one_blas_thread())")
    assert out.startswith("BLAS threads: the default (threadpoolctl is not installed: pip install "
                          "threadpoolctl)")


def test_every_numbered_example_sets_its_threads_before_it_computes():
    for path in EXAMPLES:
        text = path.read_text()
        assert "from blas_threads import one_blas_thread" in text, path.name
        assert "print(one_blas_thread())" in text, path.name
    first = python(f"import runpy\nrunpy.run_path({str(ROOT / 'examples' / '01_backprop_by_hand.py')!r}, "
                   "run_name='__main__')").splitlines()[0]
    assert first.startswith("BLAS threads: 1 (set by threadpoolctl)")


def test_every_notebook_starts_on_the_root_with_one_blas_thread():
    spec = importlib.util.spec_from_file_location("notebooks_build", ROOT / "notebooks" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    out = python("import numpy\n" + build.FIRST_CELL + "\nprint(os.getcwd())\n" + BLAS_THREADS,
                 cwd=ROOT / "notebooks")
    message, cwd, threads = out.splitlines()
    assert message == "BLAS threads: 1 (set by threadpoolctl): every run prints the same figures"
    assert Path(cwd) == ROOT and set(eval(threads)) == {1}
    for page in build.LESSON_PAGES:
        assert build.build(page).cells[1].source == build.FIRST_CELL
