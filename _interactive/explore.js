/* Interactive attention figures of the book (no dependencies, works offline).
 *
 * transformer_intro.explore writes, for every figure, a <div class="ti-explore"> holding the
 * figure's data as JSON (<script type="application/json" class="ti-explore-data">) and a PNG
 * fallback. This script, loaded once per page, turns each such div into a widget:
 *   token figures: point at an output token n to see A[n', n] over the inputs n', per layer and
 *                  head; with next-token logits, the distribution at n and a temperature slider;
 *   image figures: point at a patch to see where it attends, beside where the class token
 *                  attends, per layer and head or rolled out.
 * Every number shown sits in an element .ti-value with its stored value in data-value, so that
 * tests (tests/browser/explore_helpers.py) can read what a reader sees.
 */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  // viridis, 9 stops
  var STOPS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
               [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];

  function colour(t) {
    t = Math.max(0, Math.min(1, isFinite(t) ? t : 0));
    var x = t * (STOPS.length - 1), i = Math.min(Math.floor(x), STOPS.length - 2), f = x - i;
    var c = [0, 1, 2].map(function (k) {
      return Math.round(STOPS[i][k] + f * (STOPS[i + 1][k] - STOPS[i][k]));
    });
    return "rgb(" + c.join(",") + ")";
  }
  function ink(t) { return t > 0.55 ? "#000" : "#fff"; }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function fmt(v) { return v.toFixed(3); }
  function shown(tok) {  // make spaces and newlines visible in a token
    return tok.replace(/ /g, "\u2423").replace(/\n/g, "\u21b5") || "\u2205";
  }
  function selector(label, names, cls, extra) {
    var wrap = el("label", "ti-select");
    wrap.appendChild(document.createTextNode(label + " "));
    var s = el("select", cls);
    names.forEach(function (n, i) { var o = el("option", "", n); o.value = String(i); s.appendChild(o); });
    (extra || []).forEach(function (pair) {
      var o = el("option", "", pair[1]); o.value = pair[0]; s.appendChild(o);
    });
    wrap.appendChild(s);
    return [wrap, s];
  }
  function hook(node, index, select) {
    node.setAttribute("data-index", String(index));
    node.setAttribute("tabindex", "0");
    ["mouseenter", "click", "focus"].forEach(function (ev) {
      node.addEventListener(ev, function () { select(index); });
    });
  }
  function valueCell(cls, v, vmax) {
    var t = vmax > 0 ? v / vmax : 0;
    var cell = el("span", cls);
    cell.style.background = colour(t);
    cell.style.color = ink(t);
    return cell;
  }
  function valueSpan(v) {
    var s = el("span", "ti-value", fmt(v));
    s.setAttribute("data-value", String(v));
    return s;
  }

  // ------------------------------------------------------------------------------------------
  function tokenWidget(root, d) {
    // It opens on the last output: under a causal mask the first one can only attend to itself.
    var scale = d.scale, state = {layer: 0, head: 0, n: d.outputs.length - 1, T: 1.0};
    var box = el("div", "ti-widget ti-token");
    var controls = el("div", "ti-controls");
    var ls = selector("layer", d.layers, "ti-layer"), hs = selector("head", d.heads, "ti-head");
    if (d.layers.length > 1) controls.appendChild(ls[0]);
    controls.appendChild(hs[0]);
    var temp = null, tempLabel = null;
    if (d.next) {
      var tw = el("label", "ti-select");
      tw.appendChild(document.createTextNode("temperature "));
      temp = el("input", "ti-temp");
      temp.type = "range"; temp.min = "0.1"; temp.max = "3"; temp.step = "0.05"; temp.value = "1";
      tw.appendChild(temp);
      tempLabel = el("span", "ti-temp-value", "1.00");
      tw.appendChild(tempLabel);
      controls.appendChild(tw);
    }
    box.appendChild(controls);

    box.appendChild(el("div", "ti-caption", "output n (query): point at a token"));
    var outs = el("div", "ti-row ti-outputs");
    var outNodes = d.outputs.map(function (tok, n) {
      var b = el("span", "ti-tok ti-out", shown(tok));
      hook(b, n, function (i) { state.n = i; draw(); });
      outs.appendChild(b);
      return b;
    });
    box.appendChild(outs);
    var status = el("div", "ti-caption ti-status");
    box.appendChild(status);
    var weights = el("div", "ti-row ti-weights");
    box.appendChild(weights);
    var next = null;
    if (d.next) {
      next = el("div", "ti-next");
      box.appendChild(el("div", "ti-caption ti-next-caption"));
      box.appendChild(next);
    }
    root.appendChild(box);

    function draw() {
      outNodes.forEach(function (b, n) { b.classList.toggle("ti-active", n === state.n); });
      var col = d.w[state.layer][state.head][state.n].map(function (q) { return q / scale; });
      var vmax = Math.max.apply(null, col);
      // The maths counts positions from 1, the code's arrays from 0: both are named.
      status.textContent = "weights of output n = " + (state.n + 1) + " (\u201c" +
        shown(d.outputs[state.n]) + "\u201d) on each input n' (the code's column A[:, " +
        state.n + "]), " +
        (d.layers.length > 1 ? d.layers[state.layer] + ", " : "") + d.heads[state.head] +
        "; colour scaled to the largest (" + fmt(vmax) + ")";
      weights.textContent = "";
      col.forEach(function (v, i) {
        var cell = valueCell("ti-cell ti-in", v, vmax);
        cell.setAttribute("data-index", String(i));
        cell.appendChild(el("span", "ti-tok", shown(d.inputs[i])));
        cell.appendChild(valueSpan(v));
        weights.appendChild(cell);
      });
      if (next) drawNext();
    }
    function drawNext() {
      var logits = d.next.logits[state.n], T = state.T;
      var m = Math.max.apply(null, logits), z = 0;
      var p = logits.map(function (l) { var e = Math.exp((l - m) / T); z += e; return e; });
      p = p.map(function (e) { return e / z; });
      var order = p.map(function (_, i) { return i; }).sort(function (a, b) { return p[b] - p[a] || a - b; });
      order = order.slice(0, Math.min(10, order.length));
      box.querySelector(".ti-next-caption").textContent =
        "next-token probabilities after output n = " + (state.n + 1) + " at temperature " +
        T.toFixed(2) + " (the 10 most likely)";
      next.textContent = "";
      order.forEach(function (i) {
        var row = el("div", "ti-bar");
        row.setAttribute("data-index", String(i));
        row.appendChild(el("span", "ti-sym", shown(d.next.vocabulary[i])));
        var track = el("span", "ti-track"), fill = el("span", "ti-fill");
        fill.style.width = (100 * p[i]).toFixed(1) + "%";
        track.appendChild(fill);
        row.appendChild(track);
        row.appendChild(valueSpan(p[i]));
        next.appendChild(row);
      });
    }
    ls[1].addEventListener("change", function () { state.layer = +ls[1].value; draw(); });
    hs[1].addEventListener("change", function () { state.head = +hs[1].value; draw(); });
    if (temp) temp.addEventListener("input", function () {
      state.T = +temp.value; tempLabel.textContent = state.T.toFixed(2); draw();
    });
    draw();
  }

  // ------------------------------------------------------------------------------------------
  function imageWidget(root, d) {
    var scale = d.scale, state = {layer: d.layers.length - 1, head: 0, n: 1, rollout: false};
    var px = Math.max(2, Math.floor(196 / d.width));
    var box = el("div", "ti-widget ti-image");
    var controls = el("div", "ti-controls");
    var ls = selector("layer", d.layers, "ti-layer");
    var hs = selector("head", d.heads, "ti-head", d.rollout ? [["rollout", "rolled out (all layers)"]] : []);
    ls[1].value = String(state.layer);
    controls.appendChild(ls[0]);
    controls.appendChild(hs[0]);
    var clsButton = el("span", "ti-tok ti-out ti-cls-button", "class token");
    hook(clsButton, 0, function () { state.n = 0; draw(); });
    controls.appendChild(clsButton);
    box.appendChild(controls);
    var panels = el("div", "ti-panels");
    box.appendChild(panels);

    // the image, with one transparent rectangle per patch to point at
    var W = d.width * px, H = d.height * px;
    var pic = svg("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "ti-picture"});
    for (var y = 0; y < d.height; y++) for (var x = 0; x < d.width; x++) {
      var g = d.pixels[y * d.width + x];
      pic.appendChild(svg("rect", {x: x * px, y: y * px, width: px, height: px,
                                   fill: "rgb(" + g + "," + g + "," + g + ")"}));
    }
    var patchNodes = [null];
    for (var r = 0; r < d.rows; r++) for (var c = 0; c < d.cols; c++) {
      var rect = svg("rect", {x: c * d.patch * px, y: r * d.patch * px, width: d.patch * px,
                              height: d.patch * px, "class": "ti-patch ti-out"});
      hook(rect, 1 + r * d.cols + c, function (i) { state.n = i; draw(); });
      pic.appendChild(rect);
      patchNodes.push(rect);
    }
    var left = el("div", "ti-panel");
    left.appendChild(el("div", "ti-caption", "point at a patch"));
    left.appendChild(pic);
    panels.appendChild(left);
    var mine = el("div", "ti-panel ti-weights"), cls = el("div", "ti-panel ti-cls-weights");
    panels.appendChild(mine);
    panels.appendChild(cls);
    var status = el("div", "ti-caption ti-status");
    box.appendChild(status);
    root.appendChild(box);

    function column(n) {
      var m = state.rollout ? d.rollout : d.w[state.layer][state.head];
      return m[n].map(function (q) { return q / scale; });
    }
    function grid(target, title, values) {
      target.textContent = "";
      target.appendChild(el("div", "ti-caption", title));
      var patches = values.slice(1), vmax = Math.max.apply(null, patches);
      var head = valueCell("ti-cell ti-in ti-cls-input", values[0], Math.max(vmax, values[0]));
      head.setAttribute("data-index", "0");
      head.appendChild(el("span", "ti-tok", "class token"));
      head.appendChild(valueSpan(values[0]));
      target.appendChild(head);
      var cell = Math.max(16, Math.floor(280 / d.cols));
      var s = svg("svg", {width: cell * d.cols, height: cell * d.rows,
                          viewBox: "0 0 " + cell * d.cols + " " + cell * d.rows, "class": "ti-heat"});
      patches.forEach(function (v, i) {
        var r = Math.floor(i / d.cols), c = i % d.cols, t = vmax > 0 ? v / vmax : 0;
        var g = svg("g", {"class": "ti-in", "data-index": String(i + 1)});
        g.appendChild(svg("rect", {x: c * cell, y: r * cell, width: cell, height: cell, fill: colour(t)}));
        var text = svg("text", {x: (c + 0.5) * cell, y: (r + 0.62) * cell, "text-anchor": "middle",
                                "font-size": Math.max(6, Math.floor(cell / 4.2)), fill: ink(t),
                                "class": "ti-value", "data-value": String(v)});
        text.textContent = fmt(v).replace(/^0\./, ".");
        g.appendChild(text);
        s.appendChild(g);
      });
      target.appendChild(s);
    }
    function draw() {
      patchNodes.forEach(function (p, i) { if (p) p.classList.toggle("ti-active", i === state.n); });
      clsButton.classList.toggle("ti-active", state.n === 0);
      var where = state.rollout ? "rolled out over all layers" :
        d.layers[state.layer] + ", " + d.heads[state.head];
      var who = state.n === 0 ? "the class token" : "patch " + state.n +
        " (row " + (Math.floor((state.n - 1) / d.cols) + 1) + ", column " + ((state.n - 1) % d.cols + 1) + ")";
      grid(mine, "where " + who + " attends", column(state.n));
      grid(cls, "where the class token attends", column(0));
      status.textContent = "weights A[n', n] over the inputs n', " + where +
        "; colours scaled to each panel's largest patch weight";
      ls[1].disabled = state.rollout;
    }
    ls[1].addEventListener("change", function () { state.layer = +ls[1].value; draw(); });
    hs[1].addEventListener("change", function () {
      state.rollout = hs[1].value === "rollout";
      if (!state.rollout) state.head = +hs[1].value;
      draw();
    });
    draw();
  }

  function init(root) {
    if (root.getAttribute("data-explore-ready")) return;
    var script = root.querySelector("script.ti-explore-data");
    if (!script) return;
    try {
      var d = JSON.parse(script.textContent);
      (d.kind === "image" ? imageWidget : tokenWidget)(root, d);
      root.setAttribute("data-explore-ready", "1");
    } catch (error) {
      root.setAttribute("data-explore-error", String(error));
      if (window.console) console.warn("explore figure " + root.id + ": " + error);
    }
  }
  function initAll() { document.querySelectorAll("div.ti-explore").forEach(init); }
  // Figures that arrive later (live code re-running a cell) are initialised too. The observer
  // starts only once the page is parsed: while the parser is still streaming a figure's data
  // into its <script>, the text is a prefix of the JSON and would not parse.
  function start() {
    initAll();
    if (window.MutationObserver) {
      new MutationObserver(function (records) {
        if (records.some(function (r) { return r.addedNodes.length; })) initAll();
      }).observe(document.documentElement, {childList: true, subtree: true});
    }
  }
  window.tiExplore = {init: init, initAll: initAll};
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
