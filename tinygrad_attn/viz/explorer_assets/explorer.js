// The backprop explorer's viewer. It only shows what Python's backprop_steps produced (the JSON in
// #explorer-data): no gradient is computed here. When the page has a forward phase (data.forward,
// from forward_steps), it comes first: each op in the order it ran, with its output's value.
// Then one backward step at a time: the panel shows the op, its
// formula, the gradient arriving, what the op computed inside (attention's S, P, dP, dS, dQ, dK,
// dV), the gradient sent to each input and the notes; the graph highlights the op and its edges,
// or the folded module (lavender box) the op sits in. A click on a box shows the picture with that
// module open (pictures laid out in Python, one per fold state); "fold" or a click on an open
// module's frame folds it again.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("explorer-data").textContent);
  const steps = data.steps;
  const forward = data.forward || [];      // the forward phase: positions 0 … forward.length − 1
  const forwardAt = {};                    // backward step → its op's place in the forward phase
  forward.forEach((f, k) => { forwardAt[f.backward] = k; });
  const panel = document.getElementById("panel");
  const DENSE = 64;       // matrices with more cells are drawn as colours only (numbers on hover),
                          // unless the page was asked for them whole (explore --whole: arr.numbers)
  window.explorerTimings = [];     // ms from a key press or click to the panel laid out

  // --- the graph: one pre-laid-out picture per fold state (data.views), nodes and edges by DOT id --
  // A view's `nodes[i]` is the node drawing step i: its op, or the folded module (a lavender box)
  // around it; `folds` maps each box to the module it opens; `open` lists the modules shown open.
  // Graphviz's <title> holds the DOT id ("t11->op14"), which the browser shows on hover: keep the
  // id in data-id and show a name instead (the node's own text, "from → to", the module path).
  const idOf = (g) => g.dataset.id;
  function nameNodes(element) {
    const nameOf = {};
    element.querySelectorAll("g.node, g.edge, g.cluster").forEach((g) => {
      const title = g.querySelector("title");
      g.dataset.id = title.textContent;
      if (g.classList.contains("node")) {
        nameOf[g.dataset.id] = Array.from(g.querySelectorAll("text"), (t) => t.textContent).slice(0, 2).join(" ");
      }
    });
    element.querySelectorAll("g.node, g.edge, g.cluster").forEach((g) => {
      const title = g.querySelector("title"), id = g.dataset.id;
      if (g.classList.contains("node")) title.textContent = nameOf[id];
      else if (g.classList.contains("edge")) title.textContent = id.split("->").map((n) => nameOf[n] || n).join(" → ");
      else title.textContent = "module " + id.replace(/^cluster_/, "");
    });
  }
  const views = data.views.map((v, k) => {
    const element = document.querySelector(`#graph .view[data-view="${k}"]`);
    nameNodes(element);
    const drawn = {}, edgesInto = {}, edgesOutOf = {}, clusters = {};
    element.querySelectorAll("g.node").forEach((g) => { drawn[idOf(g)] = g; });
    element.querySelectorAll("g.edge").forEach((g) => {
      const [from, to] = idOf(g).split("->");
      (edgesInto[to] = edgesInto[to] || []).push(g);
      (edgesOutOf[from] = edgesOutOf[from] || []).push(g);
    });
    element.querySelectorAll("g.cluster").forEach((g) => {
      const path = idOf(g).replace(/^cluster_/, "");
      clusters[path] = g;
      if (v.open.includes(path)) g.classList.add("foldable");
    });
    const stepOfNode = {}, lastStep = {}, lastForward = {};
    v.nodes.forEach((id, i) => {
      if (id === null) return;
      if (!(id in stepOfNode)) stepOfNode[id] = i;
      lastStep[id] = Math.max(i, id in lastStep ? lastStep[id] : -1);
      if (i in forwardAt) lastForward[id] = Math.max(forwardAt[i], id in lastForward ? lastForward[id] : -1);
    });
    steps.forEach((s, i) => {     // a click on an op's output tensor goes to that op's step too
      if (v.nodes[i] in v.folds) return;
      (edgesOutOf[v.nodes[i]] || []).forEach((e) => {
        const out = idOf(e).split("->")[1];
        if (!(out in stepOfNode)) stepOfNode[out] = i;
      });
    });
    Object.keys(stepOfNode).forEach((id) => { if (drawn[id]) drawn[id].classList.add("steppable"); });
    Object.keys(v.folds).forEach((id) => { if (drawn[id]) drawn[id].classList.add("fold"); });
    return { ...v, element, drawn, edgesInto, edgesOutOf, clusters, stepOfNode, lastStep, lastForward };
  });
  const viewOfKey = {};
  views.forEach((v, k) => { viewOfKey[v.key] = k; });
  let view = views[0];

  // --- numbers ------------------------------------------------------------------------------
  function num(v) {            // as the terminal stepper prints them (stepper.format_number)
    if (v === "-inf") return "−∞";
    if (v === "inf") return "∞";
    if (v === "nan") return "nan";
    if (v === "…") return "…";         // the rows and columns left out of a large matrix
    if (v === 0) return "0";
    const exponent = Number(v.toExponential(3).split("e")[1]);   // of v rounded to 4 digits
    if (exponent >= -1) return v.toFixed(4);
    if (exponent >= -4) return v.toFixed(3 - exponent);
    return v.toExponential(3).replace(/e([+-])(\d)$/, "e$10$2");
  }
  function esc(text) {
    return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  }
  function colour(v, scale) {  // red for positive, blue for negative, white for 0
    if (typeof v !== "number" || scale === 0) return "#fff";
    const t = Math.min(1, Math.abs(v) / scale);
    const [r, g, b] = v > 0 ? [239, 83, 80] : [66, 133, 244];
    const mix = (c) => Math.round(255 + (c - 255) * t * 0.85);
    return `rgb(${mix(r)},${mix(g)},${mix(b)})`;
  }
  // A labelled heatmap of an array: one table per leading index (batch, head); `masked` marks
  // flat positions whose key is hidden by the mask (S = −∞ there).
  let integerCells = false;      // the array being drawn holds integers (a mask, ids): no decimals
  let everyNumber = false;       // the array was sent whole to be printed whole (explore --whole)
  function heatmap(arr, masked) {
    if (!arr) return '<div class="none">—</div>';
    const shape = arr.shape, data = arr.data;
    integerCells = arr.integer;
    everyNumber = arr.numbers;
    if (shape.length === 0) return `<div class="array">${table([""], [""], null, 0, data)}</div>`;
    const cols = shape[shape.length - 1];
    const rows = shape.length >= 2 ? shape[shape.length - 2] : 1;
    const per = rows * cols, count = data.length / Math.max(per, 1);
    const finite = data.filter((v) => typeof v === "number");
    const scale = finite.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const lead = shape.slice(0, -2);
    let out = "";
    for (let m = 0; m < count; m++) {
      const caption = lead.length ? arr.captions[m] : "";   // 'batch 0, head 1', 'batch 0, token 'cat''
      const rowLabels = shape.length >= 2 ? arr.rows : [""];
      out += table(rowLabels, arr.cols, masked, m * per, data, rows, cols, scale, caption);
    }
    let summary = `shape (${(arr.full_shape || shape).join(", ")})`;
    if (arr.head !== undefined) summary += ` · head ${arr.head} only (--head)`;
    if (arr.corners) {
      summary += ` · too large to show whole: its first and last rows and columns` +
        (arr.range ? `, min ${num(arr.range[0])}, max ${num(arr.range[1])}` : "") +
        ` (explore --whole sends every row and column)`;
    }
    if (data.length > DENSE) {
      const norm = Math.sqrt(finite.reduce((s, v) => s + v * v, 0));
      summary += ` · ${data.length} numbers, ‖·‖ = ${num(norm)}, max |·| = ${num(scale)}` +
        (arr.numbers ? "" : " (hover a cell for its row, column and number; explore --whole prints every number)");
    }
    return `<div class="array"><div class="matrices">${out}</div><div class="summary">${summary}</div></div>`;
  }
  function table(rowLabels, colLabels, masked, offset, data, rows = 1, cols = 1, scale = 0, caption = "") {
    if (scale === 0 && typeof data[offset] === "number") scale = Math.abs(data[offset]);
    const dense = rows * cols > DENSE && !everyNumber;     // colours only; labels on both axes still
    let h = `<div>${caption ? `<div class="caption">${esc(caption)}</div>` : ""}<table class="heat${dense ? " dense" : ""}">`;
    if (cols > 1) h += "<tr><th></th>" + colLabels.map((c) => `<th class="col"><span>${esc(c)}</span></th>`).join("") + "</tr>";
    for (let r = 0; r < rows; r++) {
      const row = rowLabels[r] === undefined ? "" : rowLabels[r];
      h += `<tr><th class="row">${esc(row)}</th>`;
      for (let c = 0; c < cols; c++) {
        const flat = offset + r * cols + c, v = data[flat];
        const hidden = v === "-inf" || (masked && masked.has(flat));
        const text = integerCells ? String(v) : num(v);
        const where = (caption ? caption + ", " : "") + (rows > 1 || row !== "" ? `row ${row}, ` : "") +
          (cols > 1 ? `column ${colLabels[c]}: ` : "");
        h += `<td class="c${hidden ? " masked" : ""}" data-v="${v}" title="${esc(where + text)}"` +
          ` style="background:${colour(v, scale)}">${dense ? "" : text}</td>`;
      }
      h += "</tr>";
    }
    return h + "</table></div>";
  }

  function tag(kind) { return `<span class="tag ${kind}">${kind}</span>`; }

  // --- one step -----------------------------------------------------------------------------
  function render(s) {
    let h = `<h2>step ${s.index} · <span class="op">${esc(s.op)}</span> → ` +
      `${esc(s.name)} (${s.shape.join(", ")})</h2>`;
    if (s.module) h += `<div class="module">inside module <b>${esc(s.module)}</b></div>`;
    h += `<h3>backward formula</h3><pre class="formula">${s.formula.map(esc).join("\n")}</pre>`;
    if (s.params.length) h += `<div class="params">with ${s.params.map(esc).join(", ")}</div>`;
    if (s.saved.length) {
      h += `<h3>saved by forward: the values backward reads ${tag("value")}</h3>`;
      s.saved.forEach((v) => { h += `<div class="saved"><div class="caption">${esc(v.label)}</div>${heatmap(v.array)}</div>`; });
    }
    h += `<h3>gradient arriving: dL/d(${esc(s.name)}) ${tag("gradient")}</h3>`;
    h += `<div class="grad-arriving">${heatmap(s.grad)}</div>`;
    if (s.parts.length) {
      h += `<div class="legend">${esc(s.name)} was used by ${s.parts.length} ops: the arriving gradient is the sum of these parts</div>`;
      s.parts.forEach((p) => { h += `<div class="caption">part from ${esc(p.source)}</div>${heatmap(p.grad)}`; });
    }
    if (s.insides.length) {
      const S = s.insides.find((i) => i.symbol === "S");
      let masked = null;
      if (S) {
        masked = new Set();
        S.array.data.forEach((v, k) => { if (v === "-inf") masked.add(k); });
      }
      h += `<h3>inside the op's backward (per batch and head; rows: queries, columns: keys)</h3>`;
      if (masked && masked.size) {
        h += `<div class="legend">hatched grey: masked cells (S = −∞ there: the key is hidden from that query). ` +
          `dP = dO Vᵀ is computed at every cell, masked ones too, so it may be nonzero there; P = 0 there, ` +
          `so dS = P ⊙ (dP − D) is 0.</div>`;
      }
      s.insides.forEach((i) => {
        const what = i.kind === "value" ? `value of ${i.symbol}` : `gradient dL/d${i.symbol.slice(1)}`;
        const sameShape = S && i.array.shape.join() === S.array.shape.join();
        h += `<div class="inside" data-symbol="${esc(i.symbol)}"><div><span class="equation">${esc(i.equation)}</span>` +
          ` ${tag(i.kind)} <span class="caption">${esc(what)}</span></div>${heatmap(i.array, sameShape ? masked : null)}</div>`;
      });
    }
    h += `<h3>gradients sent to the inputs ${tag("gradient")}</h3>`;
    s.inputs.forEach((inp, k) => {
      if (inp.shape === null) return;
      h += `<div class="sent" data-input="${k}"><div>→ input ${k}: <b>${esc(inp.name)}</b> (${inp.shape.join(", ")})`;
      h += inp.grad ? `: dL/d(${esc(inp.name)})</div>${heatmap(inp.grad)}` : `: <span class="none">no gradient (not differentiated)</span></div>`;
      h += "</div>";
    });
    if (s.notes.length) {
      h += `<h3>why these numbers</h3><ul class="notes">${s.notes.map((n) => `<li>${esc(n)}</li>`).join("")}</ul>`;
    }
    return h;
  }

  // --- one op of the forward pass ----------------------------------------------------------
  function renderForward(f) {
    let h = `<h2>forward ${f.index} · <span class="op">${esc(f.op)}</span> → ` +
      `${esc(f.name)} (${f.shape.join(", ")})</h2>`;
    if (f.module) h += `<div class="module">inside module <b>${esc(f.module)}</b></div>`;
    h += `<h3>what the op computes</h3><pre class="formula">${esc(f.computes)}</pre>`;
    if (f.params.length) h += `<div class="params">with ${f.params.map(esc).join(", ")}</div>`;
    const inputs = f.inputs.filter((inp) => inp.shape !== null)
      .map((inp) => `<b>${esc(inp.name)}</b> (${inp.shape.join(", ")})`);
    h += `<div class="inputs">inputs: ${inputs.join(", ")}</div>`;
    h += `<h3>value of ${esc(f.name)} ${tag("value")}</h3><div class="forward-value">${heatmap(f.value)}</div>`;
    h += `<div class="legend">backward step ${f.backward} is this op's step in the backward pass</div>`;
    return h;
  }

  // --- stepping and folding ------------------------------------------------------------------
  let current = -1;          // the backward step of the op shown (in the forward phase too)
  let position = -1;         // place in the walk: the forward ops, then the backward steps
  const inForward = () => position < forward.length;
  const lit = [];
  // Mark the current step's node in the shown view: its op (with the edges its gradient arrives
  // on, orange, and leaves by, blue) or the folded module around it; earlier steps are visited.
  function highlight() {
    lit.forEach(([el, cls]) => el.classList.remove(cls));
    lit.length = 0;
    const light = (el, cls) => { if (el) { el.classList.add(cls); lit.push([el, cls]); } };
    const done = inForward() ? view.lastForward : view.lastStep;    // places in the walk: forward or backward
    const now = inForward() ? position : current;
    Object.entries(done).forEach(([id, last]) => {
      if (view.drawn[id] && last < now) light(view.drawn[id], "visited");
    });
    const id = view.nodes[current];
    const node = view.drawn[id];
    light(node, "current");
    if (!(id in view.folds)) {        // forward: values arrive from the inputs; backward: the gradient from the output
      (view.edgesOutOf[id] || []).forEach((e) => {
        light(e, inForward() ? "send" : "arrive");
        light(view.drawn[idOf(e).split("->")[1]], "current-out");
      });
      (view.edgesInto[id] || []).forEach((e) => light(e, inForward() ? "arrive" : "send"));
    }
    return node;
  }
  function go(index) {
    const last = forward.length + steps.length - 1;
    position = Math.max(0, Math.min(last, index));
    if (inForward()) {
      const f = forward[position];
      current = f.backward;
      panel.innerHTML = renderForward(f);
      delete panel.dataset.step;
      panel.dataset.forward = String(position);
      document.getElementById("counter").textContent =
        `forward ${position} (ops 0–${forward.length - 1} in the order they ran; then ${steps.length} backward steps)`;
    } else {
      current = position - forward.length;
      panel.innerHTML = render(steps[current]);
      delete panel.dataset.forward;
      panel.dataset.step = String(current);
      document.getElementById("counter").textContent = `step ${current} (steps 0–${steps.length - 1}: ${steps.length} steps)` +
        (forward.length ? ", after the forward pass" : "");
    }
    panel.scrollTop = 0;
    document.getElementById("prev").disabled = position === 0;
    document.getElementById("next").disabled = position === last;
    const node = highlight();
    if (node) node.scrollIntoView({ block: "center", inline: "center" });
  }
  function timed(action) {
    const start = performance.now();
    action();
    void panel.offsetHeight;          // force layout so that the time includes it
    window.explorerTimings.push(performance.now() - start);
  }
  // Show the view whose innermost open module is `key` ("" = every module folded); the step stays.
  function show(key) {
    view.element.hidden = true;
    view = views[viewOfKey[key]];
    view.element.hidden = false;
    document.getElementById("graph").dataset.view = key;
    document.getElementById("opened").innerHTML = view.open.length
      ? "open: " + view.open.map((p) => `<b>${esc(p)}</b>`).join(" › ")
      : "modules folded: click a lavender box to open one";
    document.getElementById("fold").disabled = !view.open.length;
    const node = highlight();
    const cluster = view.clusters[key];
    const module = steps[current].module;
    const inside = module && (module + ".").startsWith(key + ".");
    const target = inside || !cluster ? node : cluster;
    if (target) target.scrollIntoView({ block: "center", inline: "center" });
  }
  // Fold module `path` back into its box: show the view of the nearest open module around it.
  function fold(path) {
    const around = view.open.filter((p) => p !== path && path.startsWith(p + "."));
    show(around.length ? around[around.length - 1] : "");
  }

  document.getElementById("prev").addEventListener("click", () => timed(() => go(position - 1)));
  document.getElementById("next").addEventListener("click", () => timed(() => go(position + 1)));
  document.getElementById("fold").addEventListener("click", () => fold(view.open[view.open.length - 1]));
  document.addEventListener("keydown", (event) => {
    if (event.key === "ArrowRight") { timed(() => go(position + 1)); event.preventDefault(); }
    if (event.key === "ArrowLeft") { timed(() => go(position - 1)); event.preventDefault(); }
  });
  document.getElementById("graph").addEventListener("click", (event) => {
    const g = event.target.closest("g.node, g.cluster");
    if (!g) return;
    const id = idOf(g);
    if (g.classList.contains("cluster")) {
      const path = id.replace(/^cluster_/, "");
      if (view.open.includes(path)) timed(() => fold(path));
    } else if (id in view.folds) {
      timed(() => show(view.folds[id]));
    } else if (id in view.stepOfNode) {       // that op's forward step in the forward phase, else its backward step
      const step = view.stepOfNode[id], f = forward.findIndex((x) => x.backward === step);
      timed(() => go(inForward() && f >= 0 ? f : forward.length + step));
    }
  });
  if (views.length === 1) document.getElementById("folding").hidden = true;
  go(0);
  show("");
})();
