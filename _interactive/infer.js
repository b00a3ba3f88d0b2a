/* The book's trained models, run in the page: chapter 8's ViT, chapter 9's language model and
 * chapter 10's encoder-decoder for dates.
 *
 * No library and no request beyond this book's own files: a model's weights are a small script,
 * _static/models/<name>.js (written by transformer_intro.export; its docstring gives the format),
 * added to the page only when the reader starts a widget. The forward pass follows the chapters:
 * tokens are rows x_n; one block is
 *     Y = X + MHSA(LN(X)),   Z = Y + MLP(LN(Y))                        (pre-norm, chapters 5-6)
 *     MHSA: y_n = sum_h O_h sum_n' W_h x_n' A_h[n', n],
 *           A_h[n', n] = softmax_n'(k_n' . q_n / sqrt(K)),  k = U_k,h x,  q = U_q,h x  (ch. 2-3)
 *     MLP:  W_2 gelu(W_1 x + b_1) + b_2, gelu in its tanh form                         (ch. 4)
 *     LN:   (x_d - mean) / sqrt(var + eps) * gamma_d + beta_d                           (ch. 5)
 * The same layer functions serve all three models; the language model rotates keys and queries
 * by their position (rotary, chapter 9) and keeps every block's keys and values in a cache; the
 * dates model's decoder adds cross-attention to the encoder's outputs (chapter 10).
 *
 * Widgets: <div class="book-infer" data-model="vit"></div> (draw a digit),
 * <div class="book-infer" data-model="lm"></div> (continue a prompt) and
 * <div class="book-infer" data-model="dates"></div> (a date to ISO 8601), each followed by its
 * static picture, img.book-infer-static, for print and for readers without JavaScript.
 * window.bookModels is the small API the widgets and the browser tests
 * (tests/browser/test_infer_*.py) use.
 */
(function () {
  "use strict";

  /* What this script computes, as JSON: for every block (a BlockConfig) and for each kind of
   * model, the values of the options it implements. transformer_intro.export reads it and
   * refuses to write a model with any other value, which the page would silently compute as
   * another function (grouped heads, QK-norm, RMSNorm, a gated MLP, ... are not here). */
  const SUPPORTED = {
    "block": {
      "num_kv_heads": [null], "scaled": [true], "combine_heads": ["sum"],
      "qk_activation": [null], "qk_norm": [false], "attention_bias": [false],
      "rotary_layout": ["interleaved"], "norm": ["layer"], "residual": ["input"],
      "mlp": ["mlp"], "mlp_num_layers": [1], "activation": ["gelu_tanh"]
    },
    "vit": { "block.rotary": [false] },
    "lm": { "learned_positions": [false], "tied_embeddings": [false], "scan_blocks": [false] },
    "dates": { "encoder.rotary": [false], "decoder.rotary": [false] }
  };

  const script = document.currentScript;
  const BASE = script && script.src ? script.src.replace(/[^/]*$/, "") : "_static/";

  // Each widget has a static picture beside it (img.book-infer-static, drawn by
  // scripts/infer_fallbacks.py) for readers without JavaScript and for print; with this class on
  // <html>, infer.css hides the picture on screen, where the live widget shows instead. Set while
  // the page's head is read, so that the picture never flashes up first.
  document.documentElement.classList.add("book-infer-js");

  // ---------------------------------------------------------------------------------------------
  // Loading the weights (once per page)
  // ---------------------------------------------------------------------------------------------

  const pending = {};
  const models = {};

  function loadScript(name) {
    return new Promise((resolve, reject) => {
      const tag = document.createElement("script");
      tag.src = BASE + "models/" + name + ".js";
      tag.onload = () => resolve(window.bookModelData[name]);
      tag.onerror = () => reject(new Error("could not load " + tag.src));
      document.head.appendChild(tag);
    });
  }

  function base64Bytes(text) {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  // IEEE half precision (1 sign, 5 exponent, 10 mantissa bits) to a number.
  function halfToFloat(h) {
    const sign = h & 0x8000 ? -1 : 1;
    const exponent = (h >> 10) & 0x1f;
    const mantissa = h & 0x3ff;
    if (exponent === 0) return sign * mantissa * Math.pow(2, -24);
    if (exponent === 31) return mantissa ? NaN : sign * Infinity;
    return sign * (1 + mantissa / 1024) * Math.pow(2, exponent - 15);
  }

  async function decodeNumbers(payload) {
    const bytes = base64Bytes(payload.data);
    if (payload.encoding === "float32") return new Float32Array(bytes.buffer);
    // "float16-planes-deflate": zlib stream of all low bytes, then all high bytes.
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    const planes = new Uint8Array(await new Response(stream).arrayBuffer());
    const n = payload.count;
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = halfToFloat(planes[i] | (planes[n + i] << 8));
    return out;
  }

  async function buildModel(name) {
    const payload = window.bookModelData && window.bookModelData[name]
      ? window.bookModelData[name] : await loadScript(name);
    const numbers = await decodeNumbers(payload);
    const p = {};
    for (const t of payload.tensors) {
      const size = t.shape.reduce((a, b) => a * b, 1);
      // held as float64: the products below are computed in float64 anyway, and reading doubles
      // spares a conversion per multiply (faster than float32 in JavaScript engines)
      p[t.name] = { shape: t.shape, data: Float64Array.from(numbers.subarray(t.offset, t.offset + size)) };
    }
    const model = { name, payload, config: payload.config, p, extra: payload.extra };
    return { vit: makeViT, lm: makeLM, dates: makeDates }[payload.kind](model);
  }

  function load(name) {
    if (!pending[name]) {
      pending[name] = buildModel(name).then((m) => (models[name] = m));
    }
    return pending[name];
  }

  // ---------------------------------------------------------------------------------------------
  // Layers (one token x is a Float64Array of width D; a sequence is an array of tokens)
  // ---------------------------------------------------------------------------------------------

  // y_t = W x_t (+ b) for every token x_t of xs, W stored (out, in) row-major, as eqx.nn.Linear
  // keeps it. Four rows of W at a time, each applied to every token while it is in the cache, so
  // that each number read serves several products (much faster in JavaScript engines).
  function linearAll(W, xs, b) {
    const rows = W.shape[0], cols = W.shape[1], w = W.data;
    const ys = xs.map(() => new Float64Array(rows));
    let o = 0;
    for (; o + 3 < rows; o += 4) {
      const r0 = o * cols, r1 = r0 + cols, r2 = r1 + cols, r3 = r2 + cols;
      for (let t = 0; t < xs.length; t++) {
        const x = xs[t], y = ys[t];
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (let i = 0; i < cols; i++) {
          const xi = x[i];
          s0 += w[r0 + i] * xi; s1 += w[r1 + i] * xi; s2 += w[r2 + i] * xi; s3 += w[r3 + i] * xi;
        }
        y[o] = s0; y[o + 1] = s1; y[o + 2] = s2; y[o + 3] = s3;
      }
    }
    for (; o < rows; o++) {
      for (let t = 0; t < xs.length; t++) {
        let s = 0;
        for (let i = 0, r = o * cols; i < cols; i++) s += w[r + i] * xs[t][i];
        ys[t][o] = s;
      }
    }
    if (b) for (const y of ys) for (let o = 0; o < rows; o++) y[o] += b.data[o];
    return ys;
  }

  const linear = (W, x, b) => linearAll(W, [x], b)[0]; // one token

  // One (rows, cols) slice of a stacked (H, rows, cols) tensor: the projection of head h.
  function slice(T, h) {
    const rows = T.shape[1], cols = T.shape[2];
    return { shape: [rows, cols], data: T.data.subarray(h * rows * cols, (h + 1) * rows * cols) };
  }

  // LayerNorm (chapter 5): every token on its own, mean and variance over its D features.
  function layerNorm(x, gamma, beta, eps) {
    const d = x.length;
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[i];
    mean /= d;
    let variance = 0;
    for (let i = 0; i < d; i++) variance += (x[i] - mean) * (x[i] - mean);
    variance /= d;
    const scale = 1 / Math.sqrt(variance + eps), y = new Float64Array(d);
    for (let i = 0; i < d; i++) y[i] = (x[i] - mean) * scale * gamma.data[i] + beta.data[i];
    return y;
  }

  // GELU in its tanh form (jax.nn.gelu's default): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  function gelu(x) {
    return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
  }

  // The MLP (chapter 4) on every token of xs: linear maps with a GELU between them, the last one
  // without.
  function mlp(p, prefix, xs) {
    let i = 0;
    const layer = (j, inputs) =>
      linearAll(p[prefix + ".layers." + j + ".weight"], inputs, p[prefix + ".layers." + j + ".bias"]);
    while (p[prefix + ".layers." + (i + 1) + ".weight"]) {
      xs = layer(i, xs).map((h) => h.map(gelu));
      i++;
    }
    return layer(i, xs);
  }

  // Rotary positions (chapter 9): pair (2i, 2i+1) turned by the angle n w_i, w_i = base^(-2i/K).
  const frequencyTables = {};
  function rotate(v, position, base) {
    const k = v.length, out = new Float64Array(k);
    const w = frequencyTables[k + "/" + base] || (frequencyTables[k + "/" + base] =
      Array.from({ length: k / 2 }, (_, i) => Math.pow(base, -(2 * i) / k)));
    for (let i = 0; i < k / 2; i++) {
      const c = Math.cos(position * w[i]), s = Math.sin(position * w[i]);
      out[2 * i] = v[2 * i] * c - v[2 * i + 1] * s;
      out[2 * i + 1] = v[2 * i] * s + v[2 * i + 1] * c;
    }
    return out;
  }

  // Softmax over the entries that are not -Infinity.
  function softmax(scores) {
    let max = -Infinity;
    for (const s of scores) if (s > max) max = s;
    const e = scores.map((s) => Math.exp(s - max));
    const total = e.reduce((a, b) => a + b, 0);
    return e.map((v) => v / total);
  }

  const faults = { noCausalMask: false }; // negative controls for the tests: never set by a reader

  /* Multi-head self-attention of new (normalised) tokens xs at positions start, start + 1, ...
   * Their keys and values are appended to cache (one list per head); each new token then attends
   * to every cached input n' <= n (causal) or to all of them. With a context (cross-attention,
   * chapter 10) the keys and values come from the context's tokens instead, computed once into
   * the cache. Returns the outputs and, for each head and new token, the weights A_h[n', n] over
   * the cached inputs n'. Value maps are factored, V_h = O_h W_h, or full D x D maps V_h.
   * keep[h] = 0 knocks head h out: its output is left out of the heads' sum (zero ablation, as
   * chapter 18's run_with_heads does); its weights are still computed, for the pictures. */
  function attention(p, prefix, xs, cache, { causal, rotary, base, start, context, keep }) {
    const Uk = p[prefix + ".key_projections"], Uq = p[prefix + ".query_projections"];
    const Wv = p[prefix + ".value_projections"], O = p[prefix + ".output_projections"];
    const heads = Uk.shape[0], K = Uk.shape[1], Dv = Wv.shape[1], D = xs[0].length;
    const outputs = xs.map(() => new Float64Array(D));
    const weights = [];
    // All heads' projections at once: the (H, K, D) stack is an (H K, D) matrix.
    const stacked = (T) => ({ shape: [T.shape[0] * T.shape[1], T.shape[2]], data: T.data });
    const allQ = linearAll(stacked(Uq), xs);
    const sources = context || xs, fill = !context || !cache.keys[0].length;
    const allK = fill ? linearAll(stacked(Uk), sources) : null;
    const allV = fill ? linearAll(stacked(Wv), sources) : null;
    for (let h = 0; h < heads; h++) {
      const o = O ? slice(O, h) : null;
      const queries = allQ.map((q, t) => {
        q = q.subarray(h * K, (h + 1) * K);
        return rotary ? rotate(q, start + t, base) : q;
      });
      if (fill) sources.forEach((x, t) => {
        const k = allK[t].subarray(h * K, (h + 1) * K);
        cache.keys[h].push(rotary ? rotate(k, start + t, base) : k);
        cache.values[h].push(allV[t].subarray(h * Dv, (h + 1) * Dv));
      });
      const perToken = [], mixed = [];
      const keys = cache.keys[h], values = cache.values[h], scale = 1 / Math.sqrt(K);
      queries.forEach((q, t) => {
        const scores = new Array(keys.length);
        for (let m = 0; m < keys.length; m++) {
          if (causal && !faults.noCausalMask && m > start + t) { scores[m] = -Infinity; continue; }
          let s = 0;
          const k = keys[m];
          for (let i = 0; i < K; i++) s += k[i] * q[i];
          scores[m] = s * scale;
        }
        const a = softmax(scores);
        perToken.push(a);
        // the head's value for token n: sum_n' W_h x_n' A_h[n', n]
        const v = new Float64Array(Dv);
        for (let m = 0; m < a.length; m++) {
          if (a[m]) for (let i = 0; i < Dv; i++) v[i] += a[m] * values[m][i];
        }
        mixed.push(v);
      });
      // ... which O_h maps back to width D (a full V_h is already D wide); heads are summed.
      weights.push(perToken);
      if (keep && !keep[h]) continue;
      (o ? linearAll(o, mixed) : mixed).forEach((y, t) => {
        for (let i = 0; i < D; i++) outputs[t][i] += y[i];
      });
    }
    return { outputs, weights };
  }

  // One pre-norm block (chapter 6), residuals from the input: Y = X + MHSA(LN(X)), Z = Y + MLP(LN(Y)).
  // Chapter 10's decoder layer puts cross-attention between the two: Y2 = Y1 + MHA(LN(Y1), Z).
  function block(p, b, xs, cache, options, cross) {
    const eps = options.eps;
    const normed = xs.map((x) =>
      layerNorm(x, p[b + ".attention_norm.weight"], p[b + ".attention_norm.bias"], eps));
    const { outputs, weights } = attention(p, b + ".attention", normed, cache, options);
    let ys = xs.map((x, t) => x.map((v, i) => v + outputs[t][i]));
    let crossWeights = null;
    if (cross) {
      const c = cross.prefix;
      const out = attention(p, c, ys.map((y) =>
        layerNorm(y, p[c + "_norm.weight"], p[c + "_norm.bias"], eps)), cross.cache,
      { causal: false, rotary: false, start: 0, context: cross.memory, keep: cross.keep });
      ys = ys.map((y, t) => y.map((v, i) => v + out.outputs[t][i]));
      crossWeights = out.weights;
    }
    const f = mlp(p, b + ".mlp",
      ys.map((y) => layerNorm(y, p[b + ".mlp_norm.weight"], p[b + ".mlp_norm.bias"], eps)));
    const zs = ys.map((y, t) => y.map((v, i) => v + f[t][i]));
    return { tokens: zs, weights, crossWeights };
  }

  function emptyCache(heads) {
    return { keys: Array.from({ length: heads }, () => []),
      values: Array.from({ length: heads }, () => []) };
  }

  // ---------------------------------------------------------------------------------------------
  // Chapter 8: the Vision Transformer
  // ---------------------------------------------------------------------------------------------

  function makeViT(model) {
    const { p, config } = model;
    const P = config.patch_size, side = config.image_size, perRow = side / P;
    const heads = config.num_heads, eps = config.norm_eps;

    /* pixels: 784 grey levels 0..1, row by row. The ViT reads 2 x - 1 (MNIST's 0..255 scaled to
     * -1..1). Patches are taken row by row; each is mapped by the same linear map (the patch
     * convolution's filters), its position's embedding added; the class token goes in front. */
    function forward(pixels) {
      const conv = p["tokeniser.convolution.weight"], bias = p["tokeniser.convolution.bias"];
      const D = conv.shape[0], pos = p["position_embedding.embeddings"].data;
      const tokens = [Float64Array.from(p["class_token"].data)];
      for (let r = 0; r < perRow; r++) {
        for (let c = 0; c < perRow; c++) {
          const patch = new Float64Array(P * P);
          for (let i = 0; i < P; i++) {
            for (let j = 0; j < P; j++) {
              patch[i * P + j] = 2 * pixels[(r * P + i) * side + c * P + j] - 1;
            }
          }
          const x = linear({ shape: [D, P * P], data: conv.data }, patch, bias);
          const n = r * perRow + c;
          for (let d = 0; d < D; d++) x[d] += pos[n * D + d];
          tokens.push(x);
        }
      }
      let xs = tokens;
      const attention = [];
      for (let m = 0; m < config.num_blocks; m++) {
        const out = block(p, "blocks." + m, xs, emptyCache(heads),
          { causal: false, rotary: false, eps, start: 0 });
        xs = out.tokens;
        attention.push(out.weights); // [h][n][n'] = A_h[n', n]
      }
      const cls = config.final_norm
        ? layerNorm(xs[0], p["final_norm.weight"], p["final_norm.bias"], eps) : xs[0];
      const logits = mlp(p, "head", [cls])[0];
      return { logits: Array.from(logits), probabilities: softmax(Array.from(logits)), attention };
    }

    // Attention rollout (chapter 8): heads averaged, half identity for the residual, multiplied
    // through the blocks; column 0 is what the class token gathers from each input.
    function rollout(attention) {
      const n = attention[0][0].length;
      let R = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => +(i === j)));
      for (const perHead of attention) {
        const M = Array.from({ length: n }, (_, a) => Array.from({ length: n }, (_, b) =>
          0.5 * (a === b) + 0.5 * perHead.reduce((s, h) => s + h[b][a], 0) / perHead.length));
        R = R.map((row) => M[0].map((_, j) => row.reduce((s, v, k) => s + v * M[k][j], 0)));
      }
      return R.map((row) => row[0]);
    }

    return Object.assign(model, {
      forward,
      rollout,
      logits: (pixels) => forward(pixels).logits,
      predict(pixels) {
        const l = forward(pixels).logits;
        return l.indexOf(Math.max(...l));
      },
      digits() {
        const bytes = base64Bytes(model.extra.digits);
        return model.extra.labels.map((label, i) => ({
          label, pixels: Array.from(bytes.subarray(i * 784, (i + 1) * 784), (v) => v / 255) }));
      },
    });
  }

  /* A drawing prepared as MNIST's digits were (transformer_intro.export.prepare_drawing is the
   * same in Python): crop to the ink's bounding box, scale by area averaging so that the longer
   * side is 20 pixels, then place it in 28 x 28 with its centre of mass at the centre. */
  function boxWeights(size, newSize) {
    const step = size / newSize;
    return Array.from({ length: newSize }, (_, i) => {
      const lo = i * step, hi = (i + 1) * step, w = new Float64Array(size);
      for (let y = Math.floor(lo); y < Math.min(size, Math.ceil(hi)); y++) {
        w[y] = Math.max(0, Math.min(hi, y + 1) - Math.max(lo, y)) / step;
      }
      return w;
    });
  }

  function prepareDrawing(ink, height, width, box = 20, size = 28) {
    const out = new Float64Array(size * size);
    let r0 = height, r1 = -1, c0 = width, c1 = -1;
    for (let r = 0; r < height; r++) {
      for (let c = 0; c < width; c++) {
        if (ink[r * width + c] > 0) {
          r0 = Math.min(r0, r); r1 = Math.max(r1, r); c0 = Math.min(c0, c); c1 = Math.max(c1, c);
        }
      }
    }
    if (r1 < 0) return out;
    const h = r1 - r0 + 1, w = c1 - c0 + 1, scale = box / Math.max(h, w);
    const nh = Math.max(1, Math.floor(h * scale + 0.5)), nw = Math.max(1, Math.floor(w * scale + 0.5));
    const wy = boxWeights(h, nh), wx = boxWeights(w, nw);
    // rows first: (nh, w), then columns: (nh, nw)
    const tall = wy.map((weights) => {
      const row = new Float64Array(w);
      weights.forEach((a, y) => {
        if (a) for (let c = 0; c < w; c++) row[c] += a * ink[(r0 + y) * width + c0 + c];
      });
      return row;
    });
    const small = tall.map((row) => wx.map((weights) =>
      weights.reduce((s, a, x) => s + a * row[x], 0)));
    let total = 0, cy = 0, cx = 0;
    small.forEach((row, i) => row.forEach((v, j) => {
      total += v; cy += v * (i + 0.5); cx += v * (j + 0.5);
    }));
    const top = Math.floor(size / 2 - cy / total + 0.5), left = Math.floor(size / 2 - cx / total + 0.5);
    small.forEach((row, i) => row.forEach((v, j) => {
      const r = top + i, c = left + j;
      if (r >= 0 && r < size && c >= 0 && c < size) out[r * size + c] = v;
    }));
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // Chapter 9: the character language model, with a key-value cache
  // ---------------------------------------------------------------------------------------------

  function makeLM(model) {
    const { p, config } = model;
    const symbols = model.extra.symbols, ids = new Map(symbols.map((s, i) => [s, i]));
    const eps = config.norm_eps, heads = config.num_heads, D = config.dim;
    const table = p["tokeniser.table"];

    // keep[m][h] = 0 removes head h of block m (null keeps every head).
    function newState(keep = null) {
      return { caches: Array.from({ length: config.num_blocks }, () => emptyCache(heads)),
        context: [], attention: null, keep };
    }

    /* Append symbols to the state (positions state.context.length, ...): each block reads the
     * earlier tokens' keys and values from its cache. Returns the logits of every new symbol. */
    function extend(state, newIds) {
      const start = state.context.length;
      let xs = newIds.map((id) => Float64Array.from(table.data.subarray(id * D, (id + 1) * D)));
      const attention = [];
      for (let m = 0; m < config.num_blocks; m++) {
        const out = block(p, "blocks." + m, xs, state.caches[m],
          { causal: true, rotary: config.positions === "rotary", base: config.rotary_base, eps, start,
            keep: state.keep && state.keep[m] });
        xs = out.tokens;
        attention.push(out.weights.map((perToken) => perToken[perToken.length - 1]));
      }
      state.context.push(...newIds);
      state.attention = attention; // [m][h][n']: the newest symbol's attention over the context
      const normed = xs.map((x) => layerNorm(x, p["final_norm.weight"], p["final_norm.bias"], eps));
      return linearAll(p["unembedding.weight"], normed, p["unembedding.bias"]).map((l) => Array.from(l));
    }

    function encode(text) {
      return Array.from(text).filter((ch) => ids.has(ch)).map((ch) => ids.get(ch));
    }

    // A small seeded generator (mulberry32): the same seed draws the same numbers.
    function generator(seed) {
      let a = seed >>> 0;
      return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
      };
    }

    // The distribution sampled from: softmax(logits / temperature) over the top-k symbols.
    function distribution(logits, temperature, topK) {
      let kept = logits.slice();
      if (topK && topK < logits.length) {
        const kth = logits.slice().sort((a, b) => b - a)[topK - 1];
        kept = logits.map((l) => (l >= kth ? l : -Infinity));
      }
      const t = temperature > 0 ? temperature : 1;
      return softmax(kept.map((l) => l / t));
    }

    function choose(logits, temperature, topK, random) {
      if (!(temperature > 0)) return logits.indexOf(Math.max(...logits)); // greedy: first maximum
      const probs = distribution(logits, temperature, topK);
      let u = random(), i = 0;
      for (; i < probs.length - 1; i++) {
        u -= probs[i];
        if (u < 0) break;
      }
      while (probs[i] === 0) i--;
      return i;
    }

    /* A generation: prefill the prompt, then one symbol per step. When the window is full, the
     * newest half of it is kept and the cache rebuilt from it (as `generate` does in Python). */
    function start(prompt, { temperature = 1, topK = 0, seed = 0, keep = null } = {}) {
      const state = newState(keep);
      const promptIds = encode(prompt).slice(-config.window);
      if (!promptIds.length) promptIds.push(ids.get("\n"));
      let logits = extend(state, promptIds).pop();
      const random = generator(seed);
      const text = [];
      return {
        state, text, prompt: promptIds.map((i) => symbols[i]).join(""),
        logits: () => logits,
        distribution: () => distribution(logits, temperature, topK),
        step() {
          const symbol = choose(logits, temperature, topK, random);
          const length = state.context.length, window = config.window, keep = window >> 1;
          if (length < window) {
            logits = extend(state, [symbol])[0];
          } else {
            const kept = state.context.slice(window - keep + 1).concat([symbol]);
            Object.assign(state, newState(state.keep));
            logits = extend(state, kept).pop();
          }
          text.push(symbols[symbol]);
          return symbols[symbol];
        },
      };
    }

    return Object.assign(model, {
      symbols, encode, extend, newState, start,
      decode: (list) => list.map((i) => symbols[i]).join(""),
      logits: (list, keep) => extend(newState(keep), list),
      complete(prompt, count, options) {
        const run = start(prompt, options);
        for (let i = 0; i < count; i++) run.step();
        return prompt + run.text.join("");
      },
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Chapter 10: the encoder-decoder that writes dates as ISO 8601
  // ---------------------------------------------------------------------------------------------

  function makeDates(model) {
    const { p, config, extra } = model;
    const eps = config.norm_eps, heads = config.num_heads, D = config.token_dim;
    const sourceIds = new Map(extra.source_symbols.map((s, i) => [s, i]));
    // token embedding plus the learned embedding of its position, start + n
    const embed = (table, positions, ids, start = 0) => ids.map((id, n) => {
      const x = Float64Array.from(p[table].data.subarray(id * D, (id + 1) * D));
      for (let d = 0; d < D; d++) x[d] += p[positions].data[(start + n) * D + d];
      return x;
    });

    // The encoder: source characters plus positions, blocks without a mask (padding is never
    // added here, so no token needs hiding), a final LayerNorm. Its outputs Z are the memory.
    function encode(ids) {
      let xs = embed("source_embedding.table", "source_positions.embeddings", ids);
      for (let m = 0; m < config.encoder_layers; m++) {
        xs = block(p, "encoder." + m, xs, emptyCache(heads), { causal: false, eps, start: 0 }).tokens;
      }
      return xs.map((x) => layerNorm(x, p["encoder_norm.weight"], p["encoder_norm.bias"], eps));
    }

    // A decoder state: the memory, each layer's self-attention cache and cross-attention keys;
    // keep[m][h] = 0 removes cross-attention head h of decoder layer m (null keeps every head).
    function newState(memory, keep = null) {
      return { memory, written: [], keep,
        self: Array.from({ length: config.decoder_layers }, () => emptyCache(heads)),
        cross: Array.from({ length: config.decoder_layers }, () => emptyCache(heads)) };
    }

    // Logits for new target ids at positions state.written.length, ..., and every layer's
    // cross-attention of each new position over the source ([layer][head][n][n']).
    function extend(state, ids) {
      const start = state.written.length;
      let ys = embed("target_embedding.table", "target_positions.embeddings", ids, start);
      const cross = [];
      for (let m = 0; m < config.decoder_layers; m++) {
        const out = block(p, "decoder." + m + ".block", ys, state.self[m], { causal: true, eps, start },
          { prefix: "decoder." + m + ".cross_attention", memory: state.memory, cache: state.cross[m],
            keep: state.keep && state.keep[m] });
        ys = out.tokens;
        cross.push(out.crossWeights);
      }
      state.written.push(...ids);
      const normed = ys.map((y) => layerNorm(y, p["decoder_norm.weight"], p["decoder_norm.bias"], eps));
      return { logits: linearAll(p["unembedding.weight"], normed, p["unembedding.bias"])
        .map((l) => Array.from(l)), cross };
    }

    const encodeText = (text) => Array.from(text).filter((c) => sourceIds.has(c))
      .slice(0, config.max_source_length).map((c) => sourceIds.get(c));

    /* Greedy answer: start with <start>, append the likeliest symbol until <end> (or padding), at
     * most max_target_length symbols. Returns the characters with their probabilities and
     * cross-attention. */
    function answer(text, keep = null) {
      const ids = encodeText(text);
      const state = newState(encode(ids.length ? ids : [extra.pad_id]), keep);
      const steps = [];
      let next = extra.start_id;
      for (let t = 0; t < config.max_target_length; t++) {
        const { logits, cross } = extend(state, [next]);
        const probs = softmax(logits[0]);
        next = logits[0].indexOf(Math.max(...logits[0]));
        if (next === extra.end_id || next === extra.pad_id) break;
        steps.push({ id: next, symbol: extra.target_symbols[next], probability: probs[next],
          cross: cross.map((layer) => layer.map((head) => head[0])) });
      }
      return { source: ids.map((i) => extra.source_symbols[i]), steps,
        text: steps.map((s) => s.symbol).join("") };
    }

    return Object.assign(model, {
      encode, extend, newState, answer, encodeText,
      // teacher forcing: logits of every position of the target inputs, given the source ids
      logits: (source, targets, keep) => extend(newState(encode(source), keep), targets).logits,
    });
  }

  // ---------------------------------------------------------------------------------------------
  // The widgets
  // ---------------------------------------------------------------------------------------------

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    children.forEach((c) => node.appendChild(c));
    return node;
  }

  function bars(container, labels, values, highlight) {
    container.textContent = "";
    labels.forEach((label, i) => {
      const row = el("div", { class: "bi-bar" + (i === highlight ? " bi-top" : "") });
      row.appendChild(el("span", { class: "bi-label", text: label }));
      const track = el("span", { class: "bi-track" });
      const fill = el("span", { class: "bi-fill" });
      fill.style.width = (100 * values[i]).toFixed(1) + "%";
      track.appendChild(fill);
      row.appendChild(track);
      row.appendChild(el("span", { class: "bi-value", text: values[i].toFixed(3) }));
      container.appendChild(row);
    });
  }

  function select(label, options) {
    const s = el("select", { "aria-label": label });
    options.forEach(([value, text]) => s.appendChild(el("option", { value, text })));
    return s;
  }

  function startButton(root, text, onStart) {
    const button = el("button", { class: "bi-start", type: "button", text });
    const status = el("span", { class: "bi-status", role: "status" });
    root.textContent = "";
    root.appendChild(button);
    root.appendChild(status);
    button.addEventListener("click", () => {
      button.disabled = true;
      status.textContent = "Loading the weights...";
      onStart().then(() => { button.remove(); status.remove(); },
        (e) => { status.textContent = "Could not load the model: " + e.message; });
    });
  }

  const widgets = {};

  function vitWidget(root) {
    startButton(root, "Start the digit classifier (0.6 MB of weights)", async () => {
      const vit = await load("vit");
      const canvas = el("canvas", { width: 280, height: 280, class: "bi-draw",
        "aria-label": "Draw a digit here" });
      const prepared = el("canvas", { width: 28, height: 28, class: "bi-prepared" });
      const probs = el("div", { class: "bi-bars" });
      const grid = el("div", { class: "bi-grid" });
      const blockSel = select("block", [...Array(vit.config.num_blocks).keys()]
        .map((m) => [m, "block " + (m + 1)]).concat([["rollout", "rolled out"]]));
      const headSel = select("head", [...Array(vit.config.num_heads).keys()]
        .map((h) => [h, "head " + (h + 1)]).concat([["mean", "mean of heads"]]));
      const clear = el("button", { type: "button", text: "Clear" });
      const samples = el("span", { class: "bi-samples" });
      vit.digits().forEach((d) => {
        const b = el("button", { type: "button", text: String(d.label),
          title: "load a test digit " + d.label });
        b.addEventListener("click", () => showDigit(d.pixels));
        samples.appendChild(b);
      });
      const timing = el("span", { class: "bi-timing" });
      root.appendChild(el("div", { class: "bi-row" },
        el("div", {}, canvas, el("div", {}, clear, el("span", { text: " test digits: " }), samples)),
        el("div", {}, el("div", { class: "bi-caption", text: "prepared 28 x 28" }), prepared,
          el("div", { class: "bi-caption", text: "class token's attention to the patches" }),
          el("div", {}, blockSel, headSel), grid),
        el("div", {}, el("div", { class: "bi-caption", text: "class probabilities" }), probs, timing)));

      const ctx = canvas.getContext("2d");
      const state = { pixels: null, result: null, ink: null };
      widgets.vit = state;
      function blank() {
        ctx.fillStyle = "#000";
        ctx.fillRect(0, 0, canvas.width, canvas.height);
      }
      blank();

      function show() {
        const t0 = performance.now();
        state.result = vit.forward(state.pixels);
        state.ms = performance.now() - t0;
        timing.textContent = state.ms.toFixed(1) + " ms";
        const img = prepared.getContext("2d").createImageData(28, 28);
        state.pixels.forEach((v, i) => {
          const g = Math.round(255 * v);
          img.data.set([g, g, g, 255], 4 * i);
        });
        prepared.getContext("2d").putImageData(img, 0, 0);
        const pr = state.result.probabilities;
        state.predicted = pr.indexOf(Math.max(...pr));
        bars(probs, [...Array(10).keys()].map(String), pr, state.predicted);
        showAttention();
      }

      function showAttention() {
        if (!state.result) return;
        const att = state.result.attention, m = blockSel.value, h = headSel.value;
        let column; // over the 17 inputs: class token, then the patches
        if (m === "rollout") column = vit.rollout(att);
        else if (h === "mean") {
          column = att[+m][0][0].map((_, i) => att[+m].reduce((s, a) => s + a[0][i], 0) / att[+m].length);
        } else column = att[+m][+h][0];
        const max = Math.max(...column.slice(1));
        grid.textContent = "";
        column.slice(1).forEach((w) => {
          const cell = el("span", { class: "bi-cell", text: w.toFixed(2) });
          cell.style.background = "rgba(220, 80, 20, " + (w / max).toFixed(3) + ")";
          grid.appendChild(cell);
        });
        state.shownAttention = column;
      }

      function showDigit(pixels) {
        const img = ctx.createImageData(28, 28);
        pixels.forEach((v, i) => { const g = Math.round(255 * v); img.data.set([g, g, g, 255], 4 * i); });
        const small = el("canvas", { width: 28, height: 28 });
        small.getContext("2d").putImageData(img, 0, 0);
        blank();
        ctx.imageSmoothingEnabled = false;
        ctx.drawImage(small, 0, 0, canvas.width, canvas.height);
        state.ink = null;
        state.pixels = Array.from(pixels); // a test digit is already prepared
        show();
      }

      function classifyDrawing() {
        const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
        const ink = new Float64Array(canvas.width * canvas.height);
        for (let i = 0; i < ink.length; i++) ink[i] = data[4 * i] / 255;
        state.ink = ink;
        state.pixels = Array.from(prepareDrawing(ink, canvas.height, canvas.width));
        show();
      }

      let drawing = false, last = null;
      const at = (e) => {
        const r = canvas.getBoundingClientRect();
        return [(e.clientX - r.left) * canvas.width / r.width, (e.clientY - r.top) * canvas.height / r.height];
      };
      canvas.addEventListener("pointerdown", (e) => {
        drawing = true;
        last = at(e);
        if (canvas.setPointerCapture && e.pointerId !== undefined) {
          try { canvas.setPointerCapture(e.pointerId); } catch (err) { /* synthetic events */ }
        }
        e.preventDefault();
      });
      canvas.addEventListener("pointermove", (e) => {
        if (!drawing) return;
        const now = at(e);
        ctx.strokeStyle = "#fff";
        ctx.lineWidth = 22;
        ctx.lineCap = ctx.lineJoin = "round";
        ctx.beginPath();
        ctx.moveTo(...last);
        ctx.lineTo(...now);
        ctx.stroke();
        last = now;
        e.preventDefault();
      });
      const end = () => { if (drawing) { drawing = false; classifyDrawing(); } };
      canvas.addEventListener("pointerup", end);
      canvas.addEventListener("pointercancel", end);
      clear.addEventListener("click", () => { blank(); state.result = null; });
      blockSel.addEventListener("change", showAttention);
      headSel.addEventListener("change", showAttention);
      showDigit(vit.digits()[7].pixels);
    });
  }

  function lmWidget(root) {
    startButton(root, "Start the language model (1.9 MB of weights)", async () => {
      const lm = await load("lm");
      const prompt = el("textarea", { rows: 3, class: "bi-prompt", "aria-label": "prompt" });
      prompt.value = lm.extra.prompts[0];
      const temperature = el("input", { type: "number", min: 0, max: 3, step: 0.1, value: 0.8,
        "aria-label": "temperature" });
      const topK = el("input", { type: "number", min: 0, max: lm.symbols.length, value: 10,
        "aria-label": "top-k" });
      const seed = el("input", { type: "number", min: 0, value: 1, "aria-label": "seed" });
      const blockSel = select("block", [...Array(lm.config.num_blocks).keys()]
        .map((m) => [m, "block " + (m + 1)]));
      blockSel.value = lm.config.num_blocks - 1;
      const headSel = select("head", [...Array(lm.config.num_heads).keys()]
        .map((h) => [h, "head " + (h + 1)]));
      const stepButton = el("button", { type: "button", text: "Step" });
      const runButton = el("button", { type: "button", text: "Run" });
      const resetButton = el("button", { type: "button", text: "Restart" });
      const text = el("div", { class: "bi-text", "aria-live": "polite" });
      const dist = el("div", { class: "bi-bars" });
      const speed = el("span", { class: "bi-timing" });
      const label = (t) => el("label", { text: t });
      // The head-knockout switches: one per head (block m, head h); a pressed one is removed.
      const keep = [...Array(lm.config.num_blocks)].map(() => Array(lm.config.num_heads).fill(1));
      const knockout = el("div", { class: "bi-knockout" });
      keep.forEach((row, m) => {
        const line = el("div", {}, el("span", { class: "bi-knock-block", text: "block " + (m + 1) }));
        row.forEach((_, h) => {
          const b = el("button", { type: "button", class: "bi-knock", "aria-pressed": "false",
            "data-block": m, "data-head": h, text: String(h + 1),
            title: "remove head " + (h + 1) + " of block " + (m + 1) });
          b.addEventListener("click", () => {
            keep[m][h] = 1 - keep[m][h];
            b.setAttribute("aria-pressed", String(!keep[m][h]));
            restart();
          });
          line.appendChild(b);
        });
        knockout.appendChild(line);
      });
      root.appendChild(prompt);
      root.appendChild(el("div", { class: "bi-controls" },
        label("temperature "), temperature, label(" top-k (0: all) "), topK, label(" seed "), seed,
        stepButton, runButton, resetButton));
      root.appendChild(el("div", { class: "bi-row" },
        el("div", { class: "bi-wide" }, el("div", { class: "bi-caption",
          text: "text (shaded by the chosen head's attention of the newest symbol)" }),
          el("div", {}, blockSel, headSel), text),
        el("div", {}, el("div", { class: "bi-caption", text: "next symbol" }), dist, speed),
        el("div", {}, el("div", { class: "bi-caption", text: "heads (press one to remove it)" }),
          knockout)));

      const state = { run: null, running: false, keep };
      widgets.lm = state;
      const shown = (s) => (s === "\n" ? "\u21b5" : s === " " ? "\u2423" : s);

      function restart() {
        state.running = false;
        runButton.textContent = "Run";
        state.run = lm.start(prompt.value, { temperature: +temperature.value, topK: +topK.value,
          seed: +seed.value, keep: keep.map((row) => row.slice()) });
        render();
      }

      function render() {
        const run = state.run, context = run.state.context;
        const att = run.state.attention[+blockSel.value][+headSel.value];
        // The whole text so far; the model reads only its last context.length symbols (its
        // window), shaded by the attention of the newest one. What it can no longer see is grey.
        text.textContent = "";
        const all = run.prompt + run.text.join("");
        const seen = Array.from(all).slice(-context.length);
        text.appendChild(el("span", { class: "bi-old", text: all.slice(0, all.length - seen.join("").length) }));
        seen.forEach((ch, i) => {
          const span = el("span", { class: "bi-ctx", text: ch === "\n" ? "\u21b5\n" : ch });
          span.style.background = "rgba(220, 80, 20, " + Math.min(1, 2 * att[i]).toFixed(3) + ")";
          span.title = "attention " + att[i].toFixed(3);
          text.appendChild(span);
        });
        text.scrollTop = text.scrollHeight;
        const probs = run.distribution();
        const order = probs.map((v, i) => i).sort((a, b) => probs[b] - probs[a]).slice(0, 5);
        bars(dist, order.map((i) => shown(lm.symbols[i])), order.map((i) => probs[i]), 0);
      }

      function step() {
        state.run.step();
        render();
      }

      function loop() {
        if (!state.running) return;
        const t0 = performance.now();
        let n = 0;
        while (performance.now() - t0 < 30) { state.run.step(); n++; }
        speed.textContent = Math.round(n / ((performance.now() - t0) / 1000)) + " symbols/s";
        render();
        if (state.run.text.length < 2000) requestAnimationFrame(loop);
        else { state.running = false; runButton.textContent = "Run"; }
      }

      stepButton.addEventListener("click", step);
      runButton.addEventListener("click", () => {
        state.running = !state.running;
        runButton.textContent = state.running ? "Stop" : "Run";
        if (state.running) requestAnimationFrame(loop);
      });
      resetButton.addEventListener("click", restart);
      [prompt, temperature, topK, seed].forEach((c) => c.addEventListener("change", restart));
      [blockSel, headSel].forEach((c) => c.addEventListener("change", render));
      restart();
    });
  }

  function datesWidget(root) {
    startButton(root, "Start the dates model (1.2 MB of weights)", async () => {
      const model = await load("dates");
      const input = el("input", { type: "text", class: "bi-date", "aria-label": "a date",
        maxlength: model.config.max_source_length });
      input.value = model.extra.examples[0];
      const examples = el("span", { class: "bi-samples" });
      model.extra.examples.forEach((text) => {
        const b = el("button", { type: "button", text });
        b.addEventListener("click", () => { input.value = text; show(); });
        examples.appendChild(b);
      });
      const layerSel = select("layer", [...Array(model.config.decoder_layers).keys()]
        .map((m) => [m, "layer " + (m + 1)]));
      layerSel.value = model.config.decoder_layers - 1;
      const headSel = select("head", [...Array(model.config.num_heads).keys()]
        .map((h) => [h, "head " + (h + 1)]).concat([["mean", "mean of heads"]]));
      const output = el("div", { class: "bi-answer", "aria-live": "polite" });
      const source = el("div", { class: "bi-source" });
      // The knockout switches of the decoder's cross-attention heads; a pressed one is removed.
      const keep = [...Array(model.config.decoder_layers)]
        .map(() => Array(model.config.num_heads).fill(1));
      const knockout = el("div", { class: "bi-knockout" });
      keep.forEach((row, m) => {
        const line = el("div", {}, el("span", { class: "bi-knock-block", text: "layer " + (m + 1) }));
        row.forEach((_, h) => {
          const b = el("button", { type: "button", class: "bi-knock", "aria-pressed": "false",
            "data-block": m, "data-head": h, text: String(h + 1),
            title: "remove cross-attention head " + (h + 1) + " of layer " + (m + 1) });
          b.addEventListener("click", () => {
            keep[m][h] = 1 - keep[m][h];
            b.setAttribute("aria-pressed", String(!keep[m][h]));
            show();
          });
          line.appendChild(b);
        });
        knockout.appendChild(line);
      });
      root.appendChild(el("div", {}, input, el("span", { text: " examples: " }), examples));
      root.appendChild(el("div", { class: "bi-caption",
        text: "the model's answer, each character with its probability (point at one)" }));
      root.appendChild(output);
      root.appendChild(el("div", { class: "bi-caption",
        text: "where the chosen character's cross-attention reads the source" }));
      root.appendChild(el("div", {}, layerSel, headSel));
      root.appendChild(source);
      root.appendChild(el("div", { class: "bi-caption",
        text: "cross-attention heads (press one to remove it)" }));
      root.appendChild(knockout);
      const state = { result: null, chosen: 0, keep };
      widgets.dates = state;

      function showAttention() {
        const step = state.result.steps[state.chosen];
        source.textContent = "";
        if (!step) return;
        const perHead = step.cross[+layerSel.value];
        const w = headSel.value === "mean"
          ? perHead[0].map((_, i) => perHead.reduce((a, h) => a + h[i], 0) / perHead.length)
          : perHead[+headSel.value];
        state.shownAttention = w;
        state.result.source.forEach((ch, i) => {
          const span = el("span", { class: "bi-src", text: ch, title: w[i].toFixed(3) });
          span.style.background = "rgba(220, 80, 20, " + Math.min(1, w[i]).toFixed(3) + ")";
          source.appendChild(span);
        });
      }

      function show() {
        state.result = model.answer(input.value, keep.map((row) => row.slice()));
        state.chosen = Math.min(state.chosen, Math.max(0, state.result.steps.length - 1));
        output.textContent = "";
        state.result.steps.forEach((step, i) => {
          const cell = el("button", { type: "button", class: "bi-out" + (i === state.chosen ? " bi-chosen" : "") },
            el("span", { class: "bi-out-char", text: step.symbol }),
            el("span", { class: "bi-out-p", text: step.probability.toFixed(2) }));
          const choose = () => {
            state.chosen = i;
            output.querySelectorAll(".bi-out").forEach((c, j) => c.classList.toggle("bi-chosen", j === i));
            showAttention();
          };
          cell.addEventListener("click", choose);
          cell.addEventListener("pointerenter", choose);
          output.appendChild(cell);
        });
        showAttention();
      }
      input.addEventListener("input", show);
      [layerSel, headSel].forEach((c) => c.addEventListener("change", showAttention));
      show();
    });
  }

  function init() {
    document.querySelectorAll("div.book-infer").forEach((root) => {
      if (root.dataset.ready) return;
      root.dataset.ready = "1";
      ({ vit: vitWidget, lm: lmWidget, dates: datesWidget })[root.dataset.model](root);
    });
  }

  // Negative controls for the tests (never used by the widgets): transpose the last two axes of
  // one square weight array in place (doing it twice restores it).
  function transpose(name, tensor) {
    const t = models[name].p[tensor], n = t.shape[t.shape.length - 1];
    const square = n * n, copy = t.data.slice();
    for (let base = 0; base < t.data.length; base += square) {
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) t.data[base + i * n + j] = copy[base + j * n + i];
    }
  }

  window.bookModels = { load, models, widgets, faults, prepareDrawing, init, debug: { transpose } };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
