/* Chapter 9's language model, trained in the page: the forward pass, its gradient by hand
 * (reverse mode, one operation at a time, in the reverse order), and AdamW.
 *
 * No library and no request beyond this book's own files. The forward pass is infer.js's (the
 * same equations, for a whole batch of windows at once, keeping what the backward pass reads):
 *     x_n = E[s_n]                                                   (embedding, chapter 9)
 *     Y = X + MHSA(LN(X)),   Z = Y + MLP(LN(Y))                      (pre-norm block, ch. 5-6)
 *     MHSA: y_n = sum_h O_h sum_{n' <= n} A_h[n', n] W_h x_n',
 *           A_h[n', n] = softmax_n'(k_n' . q_n / sqrt(K)),  k_n = R_n U_k x_n,  q_n = R_n U_q x_n,
 *           R_n turns pair (2i, 2i+1) by the angle n w_i, w_i = base^(-2i/K)    (rotary, ch. 9)
 *     MLP:  W_2 gelu(W_1 x + b_1) + b_2, gelu in its tanh form               (chapter 4)
 *     LN:   x^_d = (x_d - mean) / sqrt(var + eps),  y_d = x^_d gamma_d + beta_d  (chapter 5)
 *     logits_n = W LN(z_n) + b;  loss = mean_n -log softmax(logits_n)[s_{n+1}]   (chapter 9)
 * The backward pass applies the chain rule to each line, last line first: for y = f(x) it turns
 * dL/dy into dL/dx (and dL/dparameters), as chapter 8 writes the training step. AdamW, the
 * warm-up and cosine schedule and the clipping of the global gradient norm are Optax's, as the
 * book's Recipe uses them (tests/test_train_js.py checks all of it against jax.grad and Optax).
 *
 * Numbers are float64 (Float64Array), as in infer.js. A batch of B windows of N tokens is held as
 * T = B N rows of width D, row-major.
 *
 * Widget: <div class="book-train"></div> in chapter 9, followed by its static picture for print.
 * The training runs in a Web Worker built from this very file's functions (a Blob URL, so it works
 * from file:// too), or, where no worker can start, in short slices between frames.
 * window.bookTrain is the API the widget and tests/browser/test_train_ch09.py use; in Node,
 * module.exports is the same maths (tests/js/train_check.js).
 */
(function () {
  "use strict";

  // The maths, with no DOM: this function's text is also the Web Worker's program.
  function bookTrainCore() {
    const faults = { noCausalMask: false, transposedQueryBackward: false }; // negative controls

    // ---------------------------------------------------------------------------------------
    // Matrix products on row-major Float64Arrays. A matrix is (array, offset, row stride).
    // ---------------------------------------------------------------------------------------

    /* Y[t, o] (+)= sum_i X[t, i] W[o, i] for t < T, o < O, i < I: a linear map of every row,
     * W stored (out, in) as eqx.nn.Linear keeps it. Four rows of W at a time, each applied to
     * every row of X while it is in the cache. */
    function matmulABt(T, O, I, X, xo, xs, W, wo, ws, Y, yo, ys, add) {
      let o = 0;
      for (; o + 3 < O; o += 4) {
        const r0 = wo + o * ws, r1 = r0 + ws, r2 = r1 + ws, r3 = r2 + ws;
        for (let t = 0; t < T; t++) {
          const x = xo + t * xs;
          let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (let i = 0; i < I; i++) {
            const xi = X[x + i];
            s0 += W[r0 + i] * xi; s1 += W[r1 + i] * xi; s2 += W[r2 + i] * xi; s3 += W[r3 + i] * xi;
          }
          const y = yo + t * ys + o;
          if (add) { Y[y] += s0; Y[y + 1] += s1; Y[y + 2] += s2; Y[y + 3] += s3; }
          else { Y[y] = s0; Y[y + 1] = s1; Y[y + 2] = s2; Y[y + 3] = s3; }
        }
      }
      for (; o < O; o++) {
        const r = wo + o * ws;
        for (let t = 0; t < T; t++) {
          const x = xo + t * xs;
          let s = 0;
          for (let i = 0; i < I; i++) s += W[r + i] * X[x + i];
          const y = yo + t * ys + o;
          Y[y] = add ? Y[y] + s : s;
        }
      }
    }

    /* dX[t, i] += sum_o dY[t, o] W[o, i]: the gradient reaching the input of y = W x. */
    function matmulAB(T, O, I, dY, go, gs, W, wo, ws, dX, xo, xs) {
      for (let t = 0; t < T; t++) {
        const g = go + t * gs, x = xo + t * xs;
        let o = 0;
        for (; o + 3 < O; o += 4) {
          const a0 = dY[g + o], a1 = dY[g + o + 1], a2 = dY[g + o + 2], a3 = dY[g + o + 3];
          const r0 = wo + o * ws, r1 = r0 + ws, r2 = r1 + ws, r3 = r2 + ws;
          for (let i = 0; i < I; i++) {
            dX[x + i] += a0 * W[r0 + i] + a1 * W[r1 + i] + a2 * W[r2 + i] + a3 * W[r3 + i];
          }
        }
        for (; o < O; o++) {
          const a = dY[g + o], r = wo + o * ws;
          for (let i = 0; i < I; i++) dX[x + i] += a * W[r + i];
        }
      }
    }

    /* dW[o, i] += sum_t dY[t, o] X[t, i]: the gradient reaching W in y = W x, summed over rows. */
    function matmulAtB(T, O, I, dY, go, gs, X, xo, xs, dW, wo, ws) {
      for (let o = 0; o < O; o++) {
        const w = wo + o * ws;
        let t = 0;
        for (; t + 3 < T; t += 4) {
          const a0 = dY[go + t * gs + o], a1 = dY[go + (t + 1) * gs + o];
          const a2 = dY[go + (t + 2) * gs + o], a3 = dY[go + (t + 3) * gs + o];
          const x0 = xo + t * xs, x1 = x0 + xs, x2 = x1 + xs, x3 = x2 + xs;
          for (let i = 0; i < I; i++) {
            dW[w + i] += a0 * X[x0 + i] + a1 * X[x1 + i] + a2 * X[x2 + i] + a3 * X[x3 + i];
          }
        }
        for (; t < T; t++) {
          const a = dY[go + t * gs + o], x = xo + t * xs;
          for (let i = 0; i < I; i++) dW[w + i] += a * X[x + i];
        }
      }
    }

    // ---------------------------------------------------------------------------------------
    // The parameters: one flat Float64Array, tensors named as transformer_intro.export names them
    // ---------------------------------------------------------------------------------------

    function layout(config) {
      const { vocab_size: V, dim: D, num_heads: H, num_blocks: M, mlp_hidden_dim: F } = config;
      const K = D / H;
      const shapes = [["tokeniser.table", [V, D]]];
      for (let m = 0; m < M; m++) {
        const b = "blocks." + m + ".";
        shapes.push(
          [b + "attention_norm.weight", [D]], [b + "attention_norm.bias", [D]],
          [b + "attention.key_projections", [H, K, D]], [b + "attention.query_projections", [H, K, D]],
          [b + "attention.value_projections", [H, K, D]], [b + "attention.output_projections", [H, D, K]],
          [b + "mlp_norm.weight", [D]], [b + "mlp_norm.bias", [D]],
          [b + "mlp.layers.0.weight", [F, D]], [b + "mlp.layers.0.bias", [F]],
          [b + "mlp.layers.1.weight", [D, F]], [b + "mlp.layers.1.bias", [D]]);
      }
      shapes.push(["final_norm.weight", [D]], ["final_norm.bias", [D]],
        ["unembedding.weight", [V, D]], ["unembedding.bias", [V]]);
      let offset = 0;
      const tensors = shapes.map(([name, shape]) => {
        const size = shape.reduce((a, b) => a * b, 1);
        const t = { name, shape, offset, size };
        offset += size;
        return t;
      });
      return { tensors, count: offset, at: Object.fromEntries(tensors.map((t) => [t.name, t.offset])) };
    }

    // A small seeded generator (mulberry32, as infer.js): the same seed draws the same numbers.
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

    /* Initial weights drawn as the package draws them: tables N(0, 0.02^2); a linear map's and a
     * projection's entries uniform in +-1/sqrt(inputs); gains 1, shifts and biases 0 (except a
     * Linear's bias, uniform like its weight). */
    function initialParameters(config, seed) {
      const plan = layout(config), p = new Float64Array(plan.count), random = generator(seed);
      const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
      for (const t of plan.tensors) {
        const last = t.name.split(".").pop(), inputs = t.shape[t.shape.length - 1];
        for (let i = 0; i < t.size; i++) {
          let v;
          if (t.name === "tokeniser.table") v = 0.02 * normal();
          else if (t.name.endsWith("norm.weight")) v = 1;
          else if (t.name.endsWith("norm.bias")) v = 0;
          else if (last === "bias") v = 0; // set below from the weight's fan-in
          else v = (2 * random() - 1) / Math.sqrt(inputs);
          p[t.offset + i] = v;
        }
        if (last === "bias" && !t.name.includes("norm")) {
          const weight = plan.tensors.find((w) => w.name === t.name.replace(/bias$/, "weight"));
          const bound = 1 / Math.sqrt(weight.shape[1]);
          for (let i = 0; i < t.size; i++) p[t.offset + i] = (2 * random() - 1) * bound;
        }
      }
      return p;
    }

    // ---------------------------------------------------------------------------------------
    // Layers, forward and backward
    // ---------------------------------------------------------------------------------------

    /* LayerNorm of every row: keeps x^ and 1/sqrt(var + eps) for the backward pass. */
    function layerNormForward(T, D, x, p, gammaAt, betaAt, eps, y, xhat, rstd) {
      for (let t = 0; t < T; t++) {
        const r = t * D;
        let mean = 0;
        for (let d = 0; d < D; d++) mean += x[r + d];
        mean /= D;
        let variance = 0;
        for (let d = 0; d < D; d++) variance += (x[r + d] - mean) * (x[r + d] - mean);
        variance /= D;
        const s = 1 / Math.sqrt(variance + eps);
        rstd[t] = s;
        for (let d = 0; d < D; d++) {
          const h = (x[r + d] - mean) * s;
          xhat[r + d] = h;
          y[r + d] = h * p[gammaAt + d] + p[betaAt + d];
        }
      }
    }

    /* dgamma += dy x^, dbeta += dy, and with g = dy gamma:
     * dx = (g - mean_d g - x^ mean_d(g x^)) / sqrt(var + eps)  (the mean and variance depend on x). */
    function layerNormBackward(T, D, dy, xhat, rstd, p, gammaAt, grad, betaAt, dx) {
      for (let t = 0; t < T; t++) {
        const r = t * D;
        let meanG = 0, meanGx = 0;
        for (let d = 0; d < D; d++) {
          const g = dy[r + d] * p[gammaAt + d];
          grad[gammaAt + d] += dy[r + d] * xhat[r + d];
          grad[betaAt + d] += dy[r + d];
          meanG += g;
          meanGx += g * xhat[r + d];
        }
        meanG /= D; meanGx /= D;
        for (let d = 0; d < D; d++) {
          const g = dy[r + d] * p[gammaAt + d];
          dx[r + d] += (g - meanG - xhat[r + d] * meanGx) * rstd[t];
        }
      }
    }

    const GELU_C = Math.sqrt(2 / Math.PI), GELU_A = 0.044715;

    // gelu(x) = 0.5 x (1 + tanh(u)), u = c (x + a x^3); its derivative
    // 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 a x^2).
    function geluForward(n, x, y) {
      for (let i = 0; i < n; i++) {
        const v = x[i];
        y[i] = 0.5 * v * (1 + Math.tanh(GELU_C * (v + GELU_A * v * v * v)));
      }
    }

    function geluBackward(n, x, dy, dx) {
      for (let i = 0; i < n; i++) {
        const v = x[i], th = Math.tanh(GELU_C * (v + GELU_A * v * v * v));
        dx[i] = dy[i] * (0.5 * (1 + th) + 0.5 * v * (1 - th * th) * GELU_C * (1 + 3 * GELU_A * v * v));
      }
    }

    /* Rotary positions: in every row of width H K (head h at h K), pair (2i, 2i+1) of each head
     * turned by the angle n w_i, n the row's position in its window. sign = -1 turns it back,
     * which is the backward pass of a rotation (R^T = R^-1). */
    function rotateRows(T, N, H, K, base, x, sign) {
      const w = [];
      for (let i = 0; i < K / 2; i++) w.push(Math.pow(base, -(2 * i) / K));
      for (let t = 0; t < T; t++) {
        const n = t % N;
        for (let i = 0; i < K / 2; i++) {
          const c = Math.cos(n * w[i]), s = sign * Math.sin(n * w[i]);
          for (let h = 0; h < H; h++) {
            const j = t * H * K + h * K + 2 * i, a = x[j], b = x[j + 1];
            x[j] = a * c - b * s;
            x[j + 1] = a * s + b * c;
          }
        }
      }
    }

    /* Causal attention of every head in every window: scores k_n' . q_n / sqrt(K) for n' <= n,
     * their softmax A[n', n] (kept: A[((b H + h) N + n) N + n']), and the mixed values
     * sum_n' A[n', n] v_n' into mixed (T, H K). */
    function attentionForward(B, N, H, K, q, k, v, A, mixed) {
      const HK = H * K, scale = 1 / Math.sqrt(K), causal = !faults.noCausalMask;
      mixed.fill(0);
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < H; h++) {
          for (let n = 0; n < N; n++) {
            const a = ((b * H + h) * N + n) * N, qn = (b * N + n) * HK + h * K;
            const last = causal ? n : N - 1;
            let max = -Infinity;
            for (let m = 0; m <= last; m++) {
              const km = (b * N + m) * HK + h * K;
              let s = 0;
              for (let i = 0; i < K; i++) s += k[km + i] * q[qn + i];
              s *= scale;
              A[a + m] = s;
              if (s > max) max = s;
            }
            let total = 0;
            for (let m = 0; m <= last; m++) { A[a + m] = Math.exp(A[a + m] - max); total += A[a + m]; }
            for (let m = 0; m <= last; m++) A[a + m] /= total;
            for (let m = last + 1; m < N; m++) A[a + m] = 0;
            for (let m = 0; m <= last; m++) {
              const weight = A[a + m], vm = (b * N + m) * HK + h * K;
              for (let i = 0; i < K; i++) mixed[qn + i] += weight * v[vm + i];
            }
          }
        }
      }
    }

    /* The chain rule through attention, given dmixed:
     *   dA[n', n] = dmixed_n . v_n',  dv_n' += A[n', n] dmixed_n,
     *   dscore[n', n] = A[n', n] (dA[n', n] - sum_m A[m, n] dA[m, n])   (softmax's Jacobian),
     *   dq_n += sum_n' dscore k_n' / sqrt(K),  dk_n' += dscore q_n / sqrt(K).
     * Masked entries have A = 0, so no gradient flows through them. */
    function attentionBackward(B, N, H, K, q, k, v, A, dmixed, dq, dk, dv) {
      const HK = H * K, scale = 1 / Math.sqrt(K), dA = new Float64Array(N);
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < H; h++) {
          for (let n = 0; n < N; n++) {
            const a = ((b * H + h) * N + n) * N, qn = (b * N + n) * HK + h * K;
            let weighted = 0;
            for (let m = 0; m < N; m++) {
              const weight = A[a + m];
              if (weight === 0) { dA[m] = 0; continue; }
              const vm = (b * N + m) * HK + h * K;
              let s = 0;
              for (let i = 0; i < K; i++) { s += dmixed[qn + i] * v[vm + i]; dv[vm + i] += weight * dmixed[qn + i]; }
              dA[m] = s;
              weighted += weight * s;
            }
            for (let m = 0; m < N; m++) {
              const weight = A[a + m];
              if (weight === 0) continue;
              const ds = weight * (dA[m] - weighted) * scale, km = (b * N + m) * HK + h * K;
              for (let i = 0; i < K; i++) { dq[qn + i] += ds * k[km + i]; dk[km + i] += ds * q[qn + i]; }
            }
          }
        }
      }
    }

    /* Softmax cross-entropy of every row's logits against its target: returns the summed loss and
     * writes dlogits = (softmax(logits) - onehot(target)) * scale. */
    function crossEntropy(T, V, logits, targets, dlogits, scale) {
      let loss = 0;
      for (let t = 0; t < T; t++) {
        const r = t * V;
        let max = -Infinity;
        for (let j = 0; j < V; j++) if (logits[r + j] > max) max = logits[r + j];
        let total = 0;
        for (let j = 0; j < V; j++) total += Math.exp(logits[r + j] - max);
        loss += Math.log(total) + max - logits[r + targets[t]];
        if (dlogits) {
          for (let j = 0; j < V; j++) dlogits[r + j] = Math.exp(logits[r + j] - max) / total * scale;
          dlogits[r + targets[t]] -= scale;
        }
      }
      return loss;
    }

    // ---------------------------------------------------------------------------------------
    // The model: forward pass keeping what the backward pass reads, then the backward pass
    // ---------------------------------------------------------------------------------------

    function makeModel(config) {
      const plan = layout(config);
      const { vocab_size: V, dim: D, num_heads: H, num_blocks: M, mlp_hidden_dim: F } = config;
      const K = D / H, HK = H * K, eps = config.norm_eps, base = config.rotary_base;
      const at = plan.at;

      /* inputs: B N symbol ids. Returns the logits (T, V) and everything kept for backward. */
      function forward(p, inputs, B, N) {
        const T = B * N, blocks = [];
        let x = new Float64Array(T * D);
        for (let t = 0; t < T; t++) {
          x.set(p.subarray(at["tokeniser.table"] + inputs[t] * D, at["tokeniser.table"] + (inputs[t] + 1) * D), t * D);
        }
        for (let m = 0; m < M; m++) {
          const b = "blocks." + m + ".", c = { x };
          c.n1 = new Float64Array(T * D); c.xhat1 = new Float64Array(T * D); c.rstd1 = new Float64Array(T);
          layerNormForward(T, D, x, p, at[b + "attention_norm.weight"], at[b + "attention_norm.bias"], eps, c.n1, c.xhat1, c.rstd1);
          // all heads' queries, keys and values at once: (H, K, D) is an (H K, D) matrix
          c.q = new Float64Array(T * HK); c.k = new Float64Array(T * HK); c.v = new Float64Array(T * HK);
          matmulABt(T, HK, D, c.n1, 0, D, p, at[b + "attention.query_projections"], D, c.q, 0, HK, false);
          matmulABt(T, HK, D, c.n1, 0, D, p, at[b + "attention.key_projections"], D, c.k, 0, HK, false);
          matmulABt(T, HK, D, c.n1, 0, D, p, at[b + "attention.value_projections"], D, c.v, 0, HK, false);
          rotateRows(T, N, H, K, base, c.q, 1);
          rotateRows(T, N, H, K, base, c.k, 1);
          c.A = new Float64Array(B * H * N * N); c.mixed = new Float64Array(T * HK);
          attentionForward(B, N, H, K, c.q, c.k, c.v, c.A, c.mixed);
          // y = x + sum_h O_h mixed_h, O_h = output_projections[h], (D, K)
          const y = Float64Array.from(x);
          for (let h = 0; h < H; h++) {
            matmulABt(T, D, K, c.mixed, h * K, HK, p, at[b + "attention.output_projections"] + h * D * K, K, y, 0, D, true);
          }
          c.y = y;
          c.n2 = new Float64Array(T * D); c.xhat2 = new Float64Array(T * D); c.rstd2 = new Float64Array(T);
          layerNormForward(T, D, y, p, at[b + "mlp_norm.weight"], at[b + "mlp_norm.bias"], eps, c.n2, c.xhat2, c.rstd2);
          c.pre = new Float64Array(T * F);
          matmulABt(T, F, D, c.n2, 0, D, p, at[b + "mlp.layers.0.weight"], D, c.pre, 0, F, false);
          for (let t = 0; t < T; t++) for (let f = 0; f < F; f++) c.pre[t * F + f] += p[at[b + "mlp.layers.0.bias"] + f];
          c.g = new Float64Array(T * F);
          geluForward(T * F, c.pre, c.g);
          const z = Float64Array.from(y);
          matmulABt(T, D, F, c.g, 0, F, p, at[b + "mlp.layers.1.weight"], F, z, 0, D, true);
          for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) z[t * D + d] += p[at[b + "mlp.layers.1.bias"] + d];
          blocks.push(c);
          x = z;
        }
        const out = { x, nf: new Float64Array(T * D), xhatf: new Float64Array(T * D), rstdf: new Float64Array(T) };
        layerNormForward(T, D, x, p, at["final_norm.weight"], at["final_norm.bias"], eps, out.nf, out.xhatf, out.rstdf);
        const logits = new Float64Array(T * V);
        matmulABt(T, V, D, out.nf, 0, D, p, at["unembedding.weight"], D, logits, 0, V, false);
        for (let t = 0; t < T; t++) for (let j = 0; j < V; j++) logits[t * V + j] += p[at["unembedding.bias"] + j];
        return { B, N, T, inputs, blocks, out, logits };
      }

      /* dlogits (T, V) back to every parameter: adds into grad (same layout as p). */
      function backward(p, saved, dlogits, grad) {
        const { B, N, T, inputs, blocks, out } = saved;
        // logits = W nf + b
        const dnf = new Float64Array(T * D);
        matmulAtB(T, V, D, dlogits, 0, V, out.nf, 0, D, grad, at["unembedding.weight"], D);
        for (let t = 0; t < T; t++) for (let j = 0; j < V; j++) grad[at["unembedding.bias"] + j] += dlogits[t * V + j];
        matmulAB(T, V, D, dlogits, 0, V, p, at["unembedding.weight"], D, dnf, 0, D);
        let dx = new Float64Array(T * D);
        layerNormBackward(T, D, dnf, out.xhatf, out.rstdf, p, at["final_norm.weight"], grad, at["final_norm.bias"], dx);
        for (let m = M - 1; m >= 0; m--) {
          const b = "blocks." + m + ".", c = blocks[m];
          // z = y + W_2 g + b_2: dz reaches y directly and through the MLP
          const dz = dx, dy = Float64Array.from(dz), dg = new Float64Array(T * F);
          for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) grad[at[b + "mlp.layers.1.bias"] + d] += dz[t * D + d];
          matmulAtB(T, D, F, dz, 0, D, c.g, 0, F, grad, at[b + "mlp.layers.1.weight"], F);
          matmulAB(T, D, F, dz, 0, D, p, at[b + "mlp.layers.1.weight"], F, dg, 0, F);
          const dpre = new Float64Array(T * F);
          geluBackward(T * F, c.pre, dg, dpre);
          for (let t = 0; t < T; t++) for (let f = 0; f < F; f++) grad[at[b + "mlp.layers.0.bias"] + f] += dpre[t * F + f];
          matmulAtB(T, F, D, dpre, 0, F, c.n2, 0, D, grad, at[b + "mlp.layers.0.weight"], D);
          const dn2 = new Float64Array(T * D);
          matmulAB(T, F, D, dpre, 0, F, p, at[b + "mlp.layers.0.weight"], D, dn2, 0, D);
          layerNormBackward(T, D, dn2, c.xhat2, c.rstd2, p, at[b + "mlp_norm.weight"], grad, at[b + "mlp_norm.bias"], dy);
          // y = x + sum_h O_h mixed_h
          const dxIn = Float64Array.from(dy), dmixed = new Float64Array(T * HK);
          for (let h = 0; h < H; h++) {
            const o = at[b + "attention.output_projections"] + h * D * K;
            matmulAtB(T, D, K, dy, 0, D, c.mixed, h * K, HK, grad, o, K);
            matmulAB(T, D, K, dy, 0, D, p, o, K, dmixed, h * K, HK);
          }
          const dq = new Float64Array(T * HK), dk = new Float64Array(T * HK), dv = new Float64Array(T * HK);
          attentionBackward(B, N, H, K, c.q, c.k, c.v, c.A, dmixed, dq, dk, dv);
          // q and k were rotated after the projection: turn their gradients back
          rotateRows(T, N, H, K, base, dq, -1);
          rotateRows(T, N, H, K, base, dk, -1);
          // c.q, c.k hold rotated values; the projections' gradients need the normalised input n1
          const dn1 = new Float64Array(T * D);
          for (const [name, d] of [["query", dq], ["key", dk], ["value", dv]]) {
            const w = at[b + "attention." + name + "_projections"];
            matmulAtB(T, HK, D, d, 0, HK, c.n1, 0, D, grad, w, D);
            if (name === "query" && faults.transposedQueryBackward) {
              // the control: dn1 += dq U_q^T read as if U_q were stored transposed (D = H K)
              for (let t = 0; t < T; t++) for (let i = 0; i < D; i++) {
                let s = 0;
                for (let o = 0; o < HK; o++) s += d[t * HK + o] * p[w + i * D + o];
                dn1[t * D + i] += s;
              }
            } else matmulAB(T, HK, D, d, 0, HK, p, w, D, dn1, 0, D);
          }
          layerNormBackward(T, D, dn1, c.xhat1, c.rstd1, p, at[b + "attention_norm.weight"], grad, at[b + "attention_norm.bias"], dxIn);
          dx = dxIn;
        }
        // x_n = E[s_n]: each row's gradient goes to its symbol's row of the table
        const table = at["tokeniser.table"];
        for (let t = 0; t < T; t++) {
          const r = table + inputs[t] * D;
          for (let d = 0; d < D; d++) grad[r + d] += dx[t * D + d];
        }
      }

      /* Mean cross-entropy over the B windows of N + 1 symbols (an Int32Array of B (N + 1)),
       * and, with grad, its gradient added into grad times weight (to average several calls). */
      function lossAndGradient(p, windows, B, N, grad, weight = 1) {
        const inputs = new Int32Array(B * N), targets = new Int32Array(B * N);
        for (let b = 0; b < B; b++) {
          for (let n = 0; n < N; n++) {
            inputs[b * N + n] = windows[b * (N + 1) + n];
            targets[b * N + n] = windows[b * (N + 1) + n + 1];
          }
        }
        const saved = forward(p, inputs, B, N), T = B * N;
        const dlogits = grad ? new Float64Array(T * V) : null;
        const loss = crossEntropy(T, V, saved.logits, targets, dlogits, weight / T) / T;
        if (grad) backward(p, saved, dlogits, grad);
        return loss;
      }

      return { config, plan, forward, backward, lossAndGradient };
    }

    // ---------------------------------------------------------------------------------------
    // The optimiser: clipping, then AdamW with a warm-up and cosine schedule (Optax's order)
    // ---------------------------------------------------------------------------------------

    /* eta_t: from 0 up to eta over the warm-up steps, then a cosine down to the final rate at T
     * (optax.warmup_cosine_decay_schedule, as Recipe.learning_rate_schedule calls it). */
    function learningRate(recipe, t) {
      const warmup = Math.max(recipe.warmup_steps, 1), total = Math.max(recipe.steps, warmup + 1);
      const peak = recipe.learning_rate, last = recipe.final_learning_rate;
      if (t < warmup) return peak * t / warmup;
      const progress = Math.min(t - warmup, total - warmup) / (total - warmup);
      return last + (peak - last) * 0.5 * (1 + Math.cos(Math.PI * progress));
    }

    /* AdamW state: first and second moments, the step count. decay[i] = 1 where weight decay
     * applies (decay="matrices": arrays of two or more axes). */
    function makeOptimiser(plan, recipe) {
      const decay = new Uint8Array(plan.count);
      for (const t of plan.tensors) {
        if (recipe.decay === "all" || t.shape.length >= 2) decay.fill(1, t.offset, t.offset + t.size);
      }
      const state = { mu: new Float64Array(plan.count), nu: new Float64Array(plan.count), count: 0 };

      /* One step: g <- g min(1, c / |g|) (clip_by_global_norm), then
       * mu <- b1 mu + (1 - b1) g,  nu <- b2 nu + (1 - b2) g^2,
       * theta <- theta - eta_t (mu / (1 - b1^t) / (sqrt(nu / (1 - b2^t)) + 1e-8) + lambda theta).
       * Returns the gradient's norm before clipping. */
      function step(p, grad) {
        let norm = 0;
        for (let i = 0; i < grad.length; i++) norm += grad[i] * grad[i];
        norm = Math.sqrt(norm);
        const clip = recipe.clip_norm && norm >= recipe.clip_norm ? recipe.clip_norm / norm : 1;
        const eta = learningRate(recipe, state.count);
        state.count += 1;
        const { b1, b2 } = recipe, lambda = recipe.weight_decay;
        const c1 = 1 - Math.pow(b1, state.count), c2 = 1 - Math.pow(b2, state.count);
        const { mu, nu } = state;
        for (let i = 0; i < p.length; i++) {
          const g = grad[i] * clip;
          mu[i] = b1 * mu[i] + (1 - b1) * g;
          nu[i] = b2 * nu[i] + (1 - b2) * g * g;
          let update = mu[i] / c1 / (Math.sqrt(nu[i] / c2) + 1e-8);
          if (decay[i]) update += lambda * p[i];
          p[i] -= eta * update;
        }
        return norm;
      }
      return { state, step, decay };
    }

    // ---------------------------------------------------------------------------------------
    // A training session on a text: batches, held-out loss, samples, one head's attention
    // ---------------------------------------------------------------------------------------

    /* text: the play; the last tenth is held out. preset: {config (without vocab_size), recipe
     * (chapter 9's, with its own steps and batch size)}. Batches are drawn with the seed. */
    function makeSession(text, preset, seed) {
      const symbols = Array.from(new Set(Array.from(text))).sort();
      const ids = new Map(symbols.map((s, i) => [s, i]));
      const all = Int32Array.from(Array.from(text), (ch) => ids.get(ch));
      const cut = Math.floor(all.length * 0.9);
      const train = all.subarray(0, cut), heldOut = all.subarray(cut);
      const config = Object.assign({ vocab_size: symbols.length, norm_eps: 1e-5, rotary_base: 10000 }, preset.config);
      const recipe = preset.recipe, N = config.window, B = recipe.batch_size;
      const model = makeModel(config), p = initialParameters(config, seed);
      const optimiser = makeOptimiser(model.plan, recipe), grad = new Float64Array(p.length);
      const random = generator(seed ^ 0x5bd1e995);
      // the held-out windows: evenly spread, fixed (as chapter 9's evaluation windows)
      const evalCount = preset.eval_windows || 16, evalWindows = new Int32Array(evalCount * (N + 1));
      for (let w = 0; w < evalCount; w++) {
        const s = Math.floor(w * (heldOut.length - N - 1) / Math.max(evalCount - 1, 1));
        evalWindows.set(heldOut.subarray(s, s + N + 1), w * (N + 1));
      }
      const session = { symbols, config, recipe, model, p, optimiser, step: 0, tokens: 0 };

      session.batch = () => {
        const windows = new Int32Array(B * (N + 1));
        for (let b = 0; b < B; b++) {
          const s = Math.floor(random() * (train.length - N));
          windows.set(train.subarray(s, s + N + 1), b * (N + 1));
        }
        return windows;
      };
      // One optimiser step on the given windows (or fresh ones); returns the batch's mean loss.
      session.train = (windows = session.batch()) => {
        grad.fill(0);
        const loss = model.lossAndGradient(p, windows, B, N, grad);
        optimiser.step(p, grad);
        session.step += 1;
        session.tokens += B * N;
        return loss;
      };
      session.heldOutLoss = () => model.lossAndGradient(p, evalWindows, evalCount, N, null);
      // n characters after a prompt, sampled at temperature 1 from the page's own random numbers
      session.sample = (prompt, n, sampleSeed) => {
        const rand = generator(sampleSeed);
        const context = Array.from(prompt).filter((ch) => ids.has(ch)).map((ch) => ids.get(ch));
        if (!context.length) context.push(0);
        let text = "";
        for (let i = 0; i < n; i++) {
          const window = context.slice(-N), saved = model.forward(p, Int32Array.from(window), 1, window.length);
          const V = config.vocab_size, last = saved.logits.subarray((window.length - 1) * V, window.length * V);
          let max = -Infinity;
          for (const l of last) if (l > max) max = l;
          const probs = Array.from(last, (l) => Math.exp(l - max)), total = probs.reduce((a, b) => a + b, 0);
          let u = rand() * total, j = 0;
          for (; j < V - 1; j++) { u -= probs[j]; if (u < 0) break; }
          context.push(j);
          text += symbols[j];
        }
        return text;
      };
      // A_h[n', n] of block m, head h on the first characters of the held-out text: rows n
      session.attention = (m, h, length) => {
        const L = Math.min(length, N), saved = model.forward(p, Int32Array.from(heldOut.subarray(0, L)), 1, L);
        const A = saved.blocks[m].A.subarray(h * L * L, (h + 1) * L * L);
        return { text: Array.from(heldOut.subarray(0, L), (i) => symbols[i]).join(""), size: L, weights: Array.from(A) };
      };
      return session;
    }

    return { faults, layout, generator, initialParameters, makeModel, learningRate, makeOptimiser, makeSession,
      matmulABt, matmulAB, matmulAtB };
  }

  if (typeof module !== "undefined" && module.exports) { // Node: the maths alone (the tests)
    module.exports = Object.assign(bookTrainCore(), { bookTrainCore });
    return;
  }
  if (typeof window === "undefined") return;
  window.bookTrain = Object.assign(bookTrainCore(), { bookTrainCore });
})();
