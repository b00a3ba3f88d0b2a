/* Compares _interactive/train.js with the book's JAX code on tests/fixtures/train_js.json
 * (written by scripts/make_train_js_fixture.py) and prints one JSON report; tests/test_train_js.py
 * runs it and asserts on the report. Usage: node tests/js/train_check.js FIXTURE
 *
 * A difference is relative per tensor: max_i |js_i - jax_i| / max_i |jax_i|. */
"use strict";
const fs = require("fs");
const path = require("path");
const train = require(path.join(__dirname, "..", "..", "_interactive", "train.js"));

const fixture = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const decode = (text) => {
  const bytes = Buffer.from(text, "base64");
  return new Float64Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
};
const model = train.makeModel(fixture.config);
const { tensors } = model.plan;
const N = fixture.config.window, B = fixture.batch;
const windows = fixture.windows.map((w) => Int32Array.from(w));

function perTensor(js, jax) {
  const out = {};
  for (const t of tensors) {
    let diff = 0, scale = 0;
    for (let i = t.offset; i < t.offset + t.size; i++) {
      diff = Math.max(diff, Math.abs(js[i] - jax[i]));
      scale = Math.max(scale, Math.abs(jax[i]));
    }
    out[t.name] = scale ? diff / scale : diff;
  }
  return out;
}

function gradientAt(p, w) {
  const grad = new Float64Array(p.length);
  const loss = model.lossAndGradient(p, w, B, N, grad);
  return { loss, grad };
}

const p0 = decode(fixture.params);
const step0 = fixture.steps[0];
const report = { parameters: p0.length, count: model.plan.count };

// 1. the gradient at the initial weights, first batch, against jax.grad; then the controls
const { loss, grad } = gradientAt(p0, windows[0]);
report.loss = { js: loss, jax: step0.loss };
report.gradient = perTensor(grad, decode(step0.grad));
for (const fault of ["noCausalMask", "transposedQueryBackward"]) {
  train.faults[fault] = true;
  const wrong = gradientAt(p0, windows[0]);
  train.faults[fault] = false;
  report[fault] = { loss: wrong.loss, gradient: perTensor(wrong.grad, decode(step0.grad)) };
}

// 2. the optimiser alone: JAX's gradients in, Optax's weights out, step by step
{
  const p = Float64Array.from(p0), optimiser = train.makeOptimiser(model.plan, fixture.recipe);
  report.optimiser = fixture.steps.map((s) => {
    const norm = optimiser.step(p, decode(s.grad));
    return { grad_norm: norm, jax_grad_norm: s.grad_norm, weights: perTensor(p, decode(s.params_after)) };
  });
}

// 3. training: the page's own gradients and steps on the same batches
{
  const p = Float64Array.from(p0), optimiser = train.makeOptimiser(model.plan, fixture.recipe);
  report.training = fixture.steps.map((s, t) => {
    const g = gradientAt(p, windows[t]);
    optimiser.step(p, g.grad);
    return { loss: g.loss, jax_loss: s.loss, weights: perTensor(p, decode(s.params_after)) };
  });
}
process.stdout.write(JSON.stringify(report) + "\n");
