"""The explorer page driven in headless Chromium (Debian's chromium + chromium-driver, selenium
from pip; nothing downloads a browser): the arrow keys, the buttons and a click on a node show the
step Python produced, with the same numbers; the page makes no network request; screenshots.

Skipped, with the reason, where chromium, chromedriver or selenium is missing
(``.ci/browser-setup`` installs the browser on CI)."""

import math
import shutil

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn.backend import to_numpy
from tinygrad_attn.viz.example_graphs import EXAMPLES
from tinygrad_attn.viz.explorer import explore
from tinygrad_attn.viz.matrices import format_number
from tinygrad_attn.viz.stepper import backprop_steps

pytestmark = pytest.mark.slow          # a real browser: outside the quick inner loop, in CI

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("browser test skipped: chromium/chromedriver not found on PATH "
                "(Debian: apt-get install chromium chromium-driver, or run .ci/browser-setup)",
                allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="browser test skipped: selenium not installed "
                                "(pip install -e '.[dev]')")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def build(name, tmp_path, fused=True):
    """The example's page, written to tmp_path, and the steps Python produced for it."""
    example = EXAMPLES[name](fused=fused)
    path = explore(example.loss, tmp_path / f"{name}.html", tokens=example.tokens).path
    again = EXAMPLES[name](fused=fused)
    return path, list(backprop_steps(again.loss, tokens=again.tokens))


def open_page(browser, path):
    """Load the page and wait until its script has shown the first step. A large file:// page can
    still be parsing when ``get`` returns (seen about 1 load in 15 on the model page)."""
    browser.get(path.resolve().as_uri())
    WebDriverWait(browser, 300).until(lambda b: b.execute_script(
        "return document.readyState === 'complete' && document.getElementById('panel') !== null"
        " && document.getElementById('panel').dataset.step !== undefined"))


def cell_values(elements):
    """The exact numbers the cells hold (data-v: JavaScript's shortest round-trip form, or ±inf)."""
    return [float(e.get_attribute("data-v")) for e in elements]


def flat(array):
    return to_numpy(array).astype(np.float64).reshape(-1).tolist()


READ_PANEL = """
const panel = document.getElementById('panel');
const values = (css) => [...panel.querySelectorAll(css)].map((td) => td.dataset.v);
const sent = {};
panel.querySelectorAll('.sent').forEach((d) => {
  sent[d.dataset.input] = [...d.querySelectorAll('td.c')].map((td) => td.dataset.v);
});
const current = [...document.querySelectorAll('#graph g.node.current')];
return {step: panel.dataset.step, op: panel.querySelector('h2 .op').textContent,
        arriving: values('.grad-arriving td.c'), sent: sent,
        current: current.map((g) => g.dataset.id),
        label: current.map((g) => [...g.querySelectorAll('text')].map((t) => t.textContent).join(' ')),
        shown: [...document.querySelectorAll('#graph .view:not([hidden])')].map((v) => v.dataset.view)};
"""


def check_panel(browser, step):
    """The panel shows `step` (its op, the gradient arriving and each gradient sent, exactly) and
    the graph highlights its op node."""
    shown = browser.execute_script(READ_PANEL)
    assert shown["step"] == str(step.index) and shown["op"] == step.op
    assert [float(v) for v in shown["arriving"]] == flat(step.grad)
    for i, sent in enumerate(step.sent):
        if sent is not None and step.input_shapes[i] is not None:
            assert [float(v) for v in shown["sent"][str(i)]] == flat(sent), f"step {step.index}: input {i}"
    view = shown_view(browser)
    assert shown["shown"] == [str(view["index"])]                       # one picture shown
    assert shown["current"] == [view["nodes"][step.index]]
    if view["nodes"][step.index] in view["folds"]:                       # the folded module around it
        module = view["folds"][view["nodes"][step.index]]
        assert step.module.startswith(module + ".") or step.module == module
        assert shown["label"][0].endswith(module)
    else:
        assert shown["label"][0].startswith(f"step {step.index} · {step.op}")


def shown_view(browser):
    """The page's data for the view (fold state) on screen, with its index."""
    return browser.execute_script("""
        const views = JSON.parse(document.getElementById('explorer-data').textContent).views;
        const index = views.findIndex((v) => v.key === document.getElementById('graph').dataset.view);
        return {...views[index], index: index};""")


def node_of(browser, index):
    """The id of the node drawing step `index` in the view on screen."""
    return shown_view(browser)["nodes"][index]


def click(browser, node_id, inside=""):
    """A click on the SVG group with DOT id `node_id` (or on its descendant matching XPath `inside`)."""
    node = browser.find_element(By.XPATH, f"//*[local-name()='g'][@data-id='{node_id}']{inside}")
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", node)


def press(browser, key, times):
    body = browser.find_element(By.TAG_NAME, "body")
    for _ in range(times):
        body.send_keys(key)


def no_network(browser):
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources == []
    assert "http://" not in browser.page_source and "https://" not in browser.page_source


def test_arrow_keys_buttons_and_clicks_show_the_steps_python_made(browser, tmp_path):
    path, steps = build("head", tmp_path)
    open_page(browser, path)
    check_panel(browser, steps[0])
    press(browser, Keys.ARROW_RIGHT, 2)                  # step 2: the fused attention
    attention = steps[2]
    assert attention.op == "scaled_dot_product_attention"
    check_panel(browser, attention)
    for inside in attention.insides:
        cells = browser.find_elements(By.CSS_SELECTOR, f'.inside[data-symbol="{inside.symbol}"] td.c')
        assert cell_values(cells) == flat(inside.array)
    masked = browser.find_elements(By.CSS_SELECTOR, '.inside[data-symbol="S"] td.masked')
    assert len(masked) == 3 and all(c.text == "−∞" for c in masked)
    assert len(browser.find_elements(By.CSS_SELECTOR, '.inside[data-symbol="P"] td.masked')) == 3
    notes = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ul.notes li")]
    assert notes == list(attention.notes)
    visited = browser.find_elements(By.CSS_SELECTOR, "#graph g.node.visited")
    assert sorted(g.get_attribute("data-id") for g in visited) == \
        sorted(node_of(browser, i) for i in range(2))
    browser.save_screenshot(str(tmp_path / "head_attention.png"))
    assert (tmp_path / "head_attention.png").stat().st_size > 10_000

    press(browser, Keys.ARROW_LEFT, 1)
    check_panel(browser, steps[1])
    browser.find_element(By.ID, "next").click()
    browser.find_element(By.ID, "next").click()
    check_panel(browser, steps[3])

    click(browser, node_of(browser, 5))                  # click its op node in the graph
    check_panel(browser, steps[5])
    no_network(browser)


@pytest.mark.parametrize("name, fused", [("mlp", True), ("head", False), ("model", True)])
def test_every_step_of_an_example_matches_python(browser, tmp_path, name, fused):
    path, steps = build(name, tmp_path, fused)
    open_page(browser, path)
    check_panel(browser, steps[0])
    for step in steps[1:]:
        press(browser, Keys.ARROW_RIGHT, 1)
        check_panel(browser, step)
    press(browser, Keys.ARROW_RIGHT, 1)                   # past the last step: stays there
    check_panel(browser, steps[-1])
    timings = browser.execute_script("return window.explorerTimings")
    assert len(timings) == len(steps) and all(math.isfinite(t) for t in timings)
    print(f"{name}: {len(steps)} steps, step latency in the browser: median "
          f"{sorted(timings)[len(timings) // 2]:.1f} ms, max {max(timings):.1f} ms")
    browser.save_screenshot(str(tmp_path / f"{name}_last.png"))
    no_network(browser)


def drawn_ops(browser):
    """The op names drawn in the view on screen ("step N · op" labels)."""
    return browser.execute_script(r"""
        return [...document.querySelectorAll('#graph .view:not([hidden]) g.node text')]
            .map((t) => t.textContent).filter((t) => /^step \d+ · /.test(t));""")


def test_a_folded_module_opens_on_click_and_folds_back(browser, tmp_path):
    path, steps = build("model", tmp_path)
    open_page(browser, path)
    assert shown_view(browser)["key"] == ""                                       # blocks folded
    assert sorted(int(label.split()[1]) for label in drawn_ops(browser)) == [0, 1, 2, 43, 44, 45]
    press(browser, Keys.ARROW_RIGHT, 12)                  # blocks.1's attention, inside a fold
    attention = steps[12]
    assert (attention.op, attention.module) == ("scaled_dot_product_attention", "blocks.1.attn")
    check_panel(browser, attention)
    assert node_of(browser, 12) == "m_blocks.1"
    browser.save_screenshot(str(tmp_path / "model_folded.png"))

    click(browser, "m_blocks.1")                          # open the block: its attention still a box
    assert shown_view(browser)["open"] == ["blocks.1"]
    check_panel(browser, attention)
    assert node_of(browser, 12) == "m_blocks.1.attn" and "step 8 · add" in drawn_ops(browser)
    click(browser, "m_blocks.1.attn")                     # open the attention: the op itself shows
    assert shown_view(browser)["open"] == ["blocks.1", "blocks.1.attn"]
    check_panel(browser, attention)
    shown = drawn_ops(browser)
    assert f"step 12 · {attention.op}" in shown and "step 21 · linear" in shown    # its q_proj
    assert not any(label.startswith("step 32 ·") for label in shown)             # blocks.0 folded
    for inside in attention.insides:
        cells = browser.find_elements(By.CSS_SELECTOR, f'.inside[data-symbol="{inside.symbol}"] td.c')
        assert cell_values(cells) == flat(inside.array)
    browser.save_screenshot(str(tmp_path / "model_attention_open.png"))

    press(browser, Keys.ARROW_RIGHT, 2)                   # stepping goes on in the open view
    check_panel(browser, steps[14])
    click(browser, node_of(browser, 21))                  # a click on q_proj's linear jumps there
    check_panel(browser, steps[21])
    browser.find_element(By.ID, "fold").click()           # fold the attention back
    assert shown_view(browser)["open"] == ["blocks.1"]
    check_panel(browser, steps[21])
    click(browser, "cluster_blocks.1", inside="//*[local-name()='text']")      # the frame's title
    assert shown_view(browser)["key"] == "" and node_of(browser, 21) == "m_blocks.1"   # the frame's title
    check_panel(browser, steps[21])
    timings = browser.execute_script("return window.explorerTimings")
    assert all(math.isfinite(t) for t in timings)
    print(f"model: fold/open/step latency in the browser: median "
          f"{sorted(timings)[len(timings) // 2]:.1f} ms, max {max(timings):.1f} ms")
    no_network(browser)


READ_P = """
const inside = document.querySelector('.inside[data-symbol="P"]');
const table = inside.querySelector('table.heat');
return {dense: table.classList.contains('dense'),
        caption: inside.querySelector('.matrices .caption').textContent,
        rows: [...table.querySelectorAll('th.row')].map((th) => th.textContent),
        cols: [...table.querySelectorAll('th.col')].map((th) => th.textContent),
        texts: [...table.querySelectorAll('td.c')].map((td) => td.textContent),
        titles: [...table.querySelectorAll('td.c')].map((td) => td.title),
        summary: inside.querySelector('.summary').textContent};
"""


def test_heatmaps_of_a_real_text_carry_token_labels_and_whole_prints_every_number(browser, tmp_path):
    tokens = tuple("the cat sat on the mat . a dog sat .".split())
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(8, 16, 4, 1, 16)
    ids = np.array([[("the cat sat on mat a dog .".split()).index(t) for t in tokens]])

    def loss():
        return ta.functional.cross_entropy(model(ids)[0, :-1], ids[0, 1:])

    colours = explore(loss(), tmp_path / "colours.html", tokens=tokens).path
    whole = explore(loss(), tmp_path / "whole.html", tokens=tokens, head=1, whole=math.inf).path
    attention = next(s for s in backprop_steps(loss(), tokens=tokens)
                     if s.op == "scaled_dot_product_attention")
    step, p = attention.index, next(i.array for i in attention.insides if i.symbol == "P")
    for page, head in ((colours, 0), (whole, 1)):
        open_page(browser, page)
        press(browser, Keys.ARROW_RIGHT, step)
        shown = browser.execute_script(READ_P)
        assert shown["rows"] == shown["cols"] == list(tokens)             # labels on both axes, every row
        assert shown["caption"] == f"batch 0, head {head}"
        assert shown["titles"][11 * 3 + 2] == f"batch 0, head {head}, row on, column sat: " \
            f"{format_number(float(p[0, head, 3, 2]))}"
        browser.execute_script("""document.querySelector('.inside[data-symbol="P"]').scrollIntoView()""")
        browser.save_screenshot(str(tmp_path / f"{page.stem}.png"))
    assert not shown["dense"] and "head 1 only (--head)" in shown["summary"]
    assert shown["texts"] == [format_number(float(v)) for v in p[0, 1].ravel()]   # every number printed
    open_page(browser, colours)
    press(browser, Keys.ARROW_RIGHT, step)
    shown = browser.execute_script(READ_P)
    assert shown["dense"] and set(shown["texts"]) == {""}
    assert "hover a cell for its row, column and number; explore --whole prints every number" \
        in shown["summary"]
