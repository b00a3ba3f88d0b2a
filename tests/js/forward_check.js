/* train.js's forward pass against infer.js's on chapter 9's saved model (_interactive/models/lm.js):
 * infer.js runs in a small stand-in for a page (a vm context with the few DOM calls it makes),
 * loads the weights as a page does, and computes the logits of a few windows of the held-out
 * plays; train.js computes them from the same float64 weights, all windows in one batch.
 * Prints {largest, scale, windows}; tests/test_train_js.py asserts on it.
 * Usage: node tests/js/forward_check.js WINDOWS_JSON [--no-causal-mask]
 * (WINDOWS_JSON: a list of lists of symbol ids; the flag drops the mask in train.js, a control) */
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");
const root = path.join(__dirname, "..", "..", "_interactive");
const train = require(path.join(root, "train.js"));

async function main() {
  const windows = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const noop = () => {};
  const page = {
    document: {
      currentScript: null, readyState: "complete", documentElement: { classList: { add: noop } },
      querySelectorAll: () => [], addEventListener: noop, head: { appendChild: noop },
    },
    atob, Blob, Response, DecompressionStream, Float64Array, Float32Array, Uint8Array, Math, Map,
    Array, Object, Promise, Error, Number, String, JSON, console,
  };
  page.window = page;
  vm.createContext(page);
  vm.runInContext(fs.readFileSync(path.join(root, "infer.js"), "utf8"), page);
  vm.runInContext(fs.readFileSync(path.join(root, "models", "lm.js"), "utf8"), page);
  const lm = await page.window.bookModels.load("lm");

  const c = lm.config;
  const config = { vocab_size: c.vocab_size, window: c.window, dim: c.dim, num_heads: c.num_heads,
    num_blocks: c.num_blocks, mlp_hidden_dim: c.mlp_hidden_dim, norm_eps: c.norm_eps, rotary_base: c.rotary_base };
  const model = train.makeModel(config);
  const p = new Float64Array(model.plan.count);
  for (const t of model.plan.tensors) {
    if (!lm.p[t.name] || lm.p[t.name].data.length !== t.size) throw new Error("no tensor " + t.name + " of size " + t.size);
    p.set(lm.p[t.name].data, t.offset);
  }
  train.faults.noCausalMask = process.argv.includes("--no-causal-mask");
  const N = windows[0].length, B = windows.length;
  const saved = model.forward(p, Int32Array.from(windows.flat()), B, N);
  let largest = 0, scale = 0;
  windows.forEach((ids, b) => {
    const reference = lm.logits(ids); // infer.js: N rows of |V| logits
    reference.forEach((row, n) => row.forEach((v, j) => {
      largest = Math.max(largest, Math.abs(v - saved.logits[(b * N + n) * c.vocab_size + j]));
      scale = Math.max(scale, Math.abs(v));
    }));
  });
  process.stdout.write(JSON.stringify({ largest, scale, windows: B, positions: N }) + "\n");
}
main().catch((e) => { console.error(e); process.exit(1); });
