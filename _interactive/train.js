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
     * W stored (out, in) as eqx.nn.Linear keeps it. Two rows of X and four of W at a time: each
     * number read serves several products, and the eight sums stay in registers. */
    function matmulABt(T, O, I, X, xo, xs, W, wo, ws, Y, yo, ys, add) {
      let o = 0;
      for (; o + 3 < O; o += 4) {
        const r0 = wo + o * ws, r1 = r0 + ws, r2 = r1 + ws, r3 = r2 + ws;
        let t = 0;
        for (; t + 1 < T; t += 2) {
          const x = xo + t * xs, z = x + xs;
          let s0 = 0, s1 = 0, s2 = 0, s3 = 0, u0 = 0, u1 = 0, u2 = 0, u3 = 0;
          for (let i = 0; i < I; i++) {
            const a = X[x + i], b = X[z + i];
            const w0 = W[r0 + i], w1 = W[r1 + i], w2 = W[r2 + i], w3 = W[r3 + i];
            s0 += w0 * a; s1 += w1 * a; s2 += w2 * a; s3 += w3 * a;
            u0 += w0 * b; u1 += w1 * b; u2 += w2 * b; u3 += w3 * b;
          }
          const y = yo + t * ys + o, v = y + ys;
          if (add) {
            Y[y] += s0; Y[y + 1] += s1; Y[y + 2] += s2; Y[y + 3] += s3;
            Y[v] += u0; Y[v + 1] += u1; Y[v + 2] += u2; Y[v + 3] += u3;
          } else {
            Y[y] = s0; Y[y + 1] = s1; Y[y + 2] = s2; Y[y + 3] = s3;
            Y[v] = u0; Y[v + 1] = u1; Y[v + 2] = u2; Y[v + 3] = u3;
          }
        }
        for (; t < T; t++) {
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

    /* dX[t, i] += sum_o dY[t, o] W[o, i]: the gradient reaching the input of y = W x. Two rows
     * of dX and four of W at a time. */
    function matmulAB(T, O, I, dY, go, gs, W, wo, ws, dX, xo, xs) {
      let t = 0;
      for (; t + 1 < T; t += 2) {
        const g = go + t * gs, h = g + gs, x = xo + t * xs, z = x + xs;
        let o = 0;
        for (; o + 3 < O; o += 4) {
          const a0 = dY[g + o], a1 = dY[g + o + 1], a2 = dY[g + o + 2], a3 = dY[g + o + 3];
          const b0 = dY[h + o], b1 = dY[h + o + 1], b2 = dY[h + o + 2], b3 = dY[h + o + 3];
          const r0 = wo + o * ws, r1 = r0 + ws, r2 = r1 + ws, r3 = r2 + ws;
          for (let i = 0; i < I; i++) {
            const w0 = W[r0 + i], w1 = W[r1 + i], w2 = W[r2 + i], w3 = W[r3 + i];
            dX[x + i] += a0 * w0 + a1 * w1 + a2 * w2 + a3 * w3;
            dX[z + i] += b0 * w0 + b1 * w1 + b2 * w2 + b3 * w3;
          }
        }
        for (; o < O; o++) {
          const a = dY[g + o], b = dY[h + o], r = wo + o * ws;
          for (let i = 0; i < I; i++) { dX[x + i] += a * W[r + i]; dX[z + i] += b * W[r + i]; }
        }
      }
      for (; t < T; t++) {
        const g = go + t * gs, x = xo + t * xs;
        for (let o = 0; o < O; o++) {
          const a = dY[g + o], r = wo + o * ws;
          for (let i = 0; i < I; i++) dX[x + i] += a * W[r + i];
        }
      }
    }

    /* dW[o, i] += sum_t dY[t, o] X[t, i]: the gradient reaching W in y = W x, summed over rows.
     * Two rows of dW and four rows of X at a time. */
    function matmulAtB(T, O, I, dY, go, gs, X, xo, xs, dW, wo, ws) {
      let o = 0;
      for (; o + 1 < O; o += 2) {
        const w = wo + o * ws, v = w + ws;
        let t = 0;
        for (; t + 3 < T; t += 4) {
          const g0 = go + t * gs + o, g1 = g0 + gs, g2 = g1 + gs, g3 = g2 + gs;
          const a0 = dY[g0], a1 = dY[g1], a2 = dY[g2], a3 = dY[g3];
          const b0 = dY[g0 + 1], b1 = dY[g1 + 1], b2 = dY[g2 + 1], b3 = dY[g3 + 1];
          const x0 = xo + t * xs, x1 = x0 + xs, x2 = x1 + xs, x3 = x2 + xs;
          for (let i = 0; i < I; i++) {
            const c0 = X[x0 + i], c1 = X[x1 + i], c2 = X[x2 + i], c3 = X[x3 + i];
            dW[w + i] += a0 * c0 + a1 * c1 + a2 * c2 + a3 * c3;
            dW[v + i] += b0 * c0 + b1 * c1 + b2 * c2 + b3 * c3;
          }
        }
        for (; t < T; t++) {
          const a = dY[go + t * gs + o], b = dY[go + t * gs + o + 1], x = xo + t * xs;
          for (let i = 0; i < I; i++) { dW[w + i] += a * X[x + i]; dW[v + i] += b * X[x + i]; }
        }
      }
      for (; o < O; o++) {
        const w = wo + o * ws;
        for (let t = 0; t < T; t++) {
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

    // y_t += b for every row t (b at p[at ...]), and its backward pass: db += sum_t dy_t.
    function addBias(T, n, y, p, at) {
      for (let t = 0; t < T; t++) for (let j = 0, r = t * n; j < n; j++) y[r + j] += p[at + j];
    }
    function biasGradient(T, n, dy, grad, at) {
      for (let t = 0; t < T; t++) for (let j = 0, r = t * n; j < n; j++) grad[at + j] += dy[r + j];
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
          addBias(T, F, c.pre, p, at[b + "mlp.layers.0.bias"]);
          c.g = new Float64Array(T * F);
          geluForward(T * F, c.pre, c.g);
          const z = Float64Array.from(y);
          matmulABt(T, D, F, c.g, 0, F, p, at[b + "mlp.layers.1.weight"], F, z, 0, D, true);
          addBias(T, D, z, p, at[b + "mlp.layers.1.bias"]);
          blocks.push(c);
          x = z;
        }
        const out = { x, nf: new Float64Array(T * D), xhatf: new Float64Array(T * D), rstdf: new Float64Array(T) };
        layerNormForward(T, D, x, p, at["final_norm.weight"], at["final_norm.bias"], eps, out.nf, out.xhatf, out.rstdf);
        const logits = new Float64Array(T * V);
        matmulABt(T, V, D, out.nf, 0, D, p, at["unembedding.weight"], D, logits, 0, V, false);
        addBias(T, V, logits, p, at["unembedding.bias"]);
        return { B, N, T, inputs, blocks, out, logits };
      }

      /* dlogits (T, V) back to every parameter: adds into grad (same layout as p). */
      function backward(p, saved, dlogits, grad) {
        const { B, N, T, inputs, blocks, out } = saved;
        // logits = W nf + b
        const dnf = new Float64Array(T * D);
        matmulAtB(T, V, D, dlogits, 0, V, out.nf, 0, D, grad, at["unembedding.weight"], D);
        biasGradient(T, V, dlogits, grad, at["unembedding.bias"]);
        matmulAB(T, V, D, dlogits, 0, V, p, at["unembedding.weight"], D, dnf, 0, D);
        let dx = new Float64Array(T * D);
        layerNormBackward(T, D, dnf, out.xhatf, out.rstdf, p, at["final_norm.weight"], grad, at["final_norm.bias"], dx);
        for (let m = M - 1; m >= 0; m--) {
          const b = "blocks." + m + ".", c = blocks[m];
          // z = y + W_2 g + b_2: dz reaches y directly and through the MLP
          const dz = dx, dy = Float64Array.from(dz), dg = new Float64Array(T * F);
          biasGradient(T, D, dz, grad, at[b + "mlp.layers.1.bias"]);
          matmulAtB(T, D, F, dz, 0, D, c.g, 0, F, grad, at[b + "mlp.layers.1.weight"], F);
          matmulAB(T, D, F, dz, 0, D, p, at[b + "mlp.layers.1.weight"], F, dg, 0, F);
          const dpre = new Float64Array(T * F);
          geluBackward(T * F, c.pre, dg, dpre);
          biasGradient(T, F, dpre, grad, at[b + "mlp.layers.0.bias"]);
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
      /* The same step cut into parts of one window each (the gradient of the mean is the mean of
       * the windows' gradients, each weighted 1/B), so that a page without a worker can train
       * between frames. Returns the batch's loss when the step is done, null before. */
      let pending = null, done = 0, partLoss = 0;
      session.trainPart = () => {
        if (!pending) {
          pending = session.batch();
          done = 0; partLoss = 0; grad.fill(0);
          if (session.recorded.length < session.record) session.recorded.push(Array.from(pending));
        }
        partLoss += model.lossAndGradient(p, pending.subarray(done * (N + 1), (done + 1) * (N + 1)), 1, N, grad, 1 / B) / B;
        done += 1;
        if (done < B) return null;
        optimiser.step(p, grad);
        pending = null;
        session.step += 1;
        session.tokens += B * N;
        return partLoss;
      };
      session.record = 0; // how many batches to keep, with the initial weights (for the tests)
      session.recorded = [];
      session.initial = Float64Array.from(p);
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

    // ---------------------------------------------------------------------------------------
    // The driver: runs a session in slices and reports by messages (in a worker or the page)
    // ---------------------------------------------------------------------------------------

    /* post(message) receives {type: "ready" | "step" | "heldOut" | "sample" | "done" | "dump"};
     * handle(message) takes {type: "start", text, preset, seed, record} | "pause" | "resume" |
     * "view" (block, head) | "dump". sliceMs: how long one slice trains before it yields. */
    function makeDriver(post, sliceMs) {
      const clock = () => (typeof performance !== "undefined" ? performance.now() : Date.now());
      let session = null, running = false, trainMs = 0, lastSample = -Infinity, view = { block: 0, head: 0 };
      let prompt = "\n";
      const evalEvery = 20, sampleEveryMs = 4000;

      function heldOut() {
        post({ type: "heldOut", step: session.step, loss: session.heldOutLoss() });
      }
      function sample() {
        lastSample = clock();
        const m = Math.min(view.block, session.config.num_blocks - 1), h = Math.min(view.head, session.config.num_heads - 1);
        post({ type: "sample", step: session.step, prompt, text: session.sample(prompt, 80, session.step + 1),
          attention: session.attention(m, h, 32), block: m, head: h });
      }
      function loop() {
        if (!running) return;
        const begin = clock();
        while (running && clock() - begin < sliceMs && session.step < session.recipe.steps) {
          const t = clock(), loss = session.trainPart();
          trainMs += clock() - t;
          if (loss === null) continue;
          post({ type: "step", step: session.step, loss, tokens: session.tokens, seconds: trainMs / 1000 });
          if (session.step % evalEvery === 0) heldOut();
        }
        if (clock() - lastSample > sampleEveryMs) sample();
        if (session.step >= session.recipe.steps) {
          running = false;
          heldOut(); sample();
          post({ type: "done", step: session.step });
          return;
        }
        setTimeout(loop, 0);
      }
      function handle(message) {
        if (message.type === "start") {
          session = makeSession(message.text, message.preset, message.seed);
          session.record = message.record || 0;
          trainMs = 0; lastSample = -Infinity;
          // the prompt: the first speaker's name in the held-out tenth, e.g. "\nHam.\n"
          const speaker = message.text.slice(Math.floor(message.text.length * 0.9)).match(/\n\n([A-Z][A-Za-z ]*\.\n)/);
          prompt = speaker ? "\n" + speaker[1] : "\n";
          post({ type: "ready", parameters: session.p.length, symbols: session.symbols.length,
            config: session.config, steps: session.recipe.steps });
          heldOut();
          running = true;
          setTimeout(loop, 0);
        } else if (message.type === "pause") {
          running = false;
        } else if (message.type === "resume" && session && !running && session.step < session.recipe.steps) {
          running = true;
          setTimeout(loop, 0);
        } else if (message.type === "view") {
          view = { block: message.block, head: message.head };
          if (session && !running) sample();
        } else if (message.type === "dump" && session) {
          post({ type: "dump", config: session.config, recipe: session.recipe, step: session.step,
            initial: Array.from(session.initial), windows: session.recorded });
        }
      }
      return { handle };
    }

    // In a worker: messages in, messages out.
    function workerMain(scope) {
      const driver = makeDriver((m) => scope.postMessage(m), 200);
      scope.onmessage = (e) => driver.handle(e.data);
    }

    return { faults, layout, generator, initialParameters, makeModel, learningRate, makeOptimiser, makeSession,
      makeDriver, workerMain, matmulABt, matmulAB, matmulAtB };
  }

  if (typeof module !== "undefined" && module.exports) { // Node: the maths alone (the tests)
    module.exports = Object.assign(bookTrainCore(), { bookTrainCore });
    return;
  }
  if (typeof window === "undefined") return;
  const core = bookTrainCore();
  const script = document.currentScript;
  const BASE = script && script.src ? script.src.replace(/[^/]*$/, "") : "_static/";
  document.documentElement.classList.add("book-train-js");

  // ---------------------------------------------------------------------------------------------
  // The widget
  // ---------------------------------------------------------------------------------------------

  // Chapter 9's recipe (tasks.SHAKESPEARE_RECIPE: AdamW, b2 = 0.99, weight decay 0.1 on the
  // matrices, clipping at 1, warm-up then cosine to 1e-4) with fewer windows per step.
  const recipe = (steps) => ({ steps, batch_size: 16, learning_rate: 2e-3, warmup_steps: 50,
    final_learning_rate: 1e-4, weight_decay: 0.1, decay: "matrices", b1: 0.9, b2: 0.99, clip_norm: 1.0 });
  const PRESETS = {
    small: { label: "small: D = 32, 1 block", config: { window: 64, dim: 32, num_heads: 4, num_blocks: 1, mlp_hidden_dim: 128 }, recipe: recipe(2000) },
    medium: { label: "medium: D = 48, 2 blocks", config: { window: 64, dim: 48, num_heads: 4, num_blocks: 2, mlp_hidden_dim: 192 }, recipe: recipe(1500) },
    large: { label: "large: D = 64, 2 blocks", config: { window: 64, dim: 64, num_heads: 4, num_blocks: 2, mlp_hidden_dim: 256 }, recipe: recipe(1000) },
  };
  const PLAYS = { hamlet: "Hamlet", romeo_and_juliet: "Romeo and Juliet", sonnets: "The Sonnets" };

  const style = document.createElement("style");
  style.textContent = [
    ".book-train { border: 1px solid #ccc; border-radius: 6px; padding: 0.6em; margin: 1em 0; }",
    ".book-train .bt-row { display: flex; flex-wrap: wrap; gap: 0.8em; align-items: flex-start; margin: 0.3em 0; }",
    ".book-train canvas { border: 1px solid #ddd; max-width: 100%; }",
    ".book-train .bt-sample { white-space: pre-wrap; font-family: monospace; min-height: 4.5em; background: #f7f7f7; padding: 0.4em; flex: 1 1 100%; }",
    ".book-train .bt-caption { font-size: 0.85em; color: #555; }",
    "@media screen { html.book-train-js .book-train-static { display: none; } }",
    "@media print { .book-train { display: none; } }",
  ].join("\n");
  document.head.appendChild(style);

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    children.forEach((c) => node.appendChild(typeof c === "string" ? document.createTextNode(c) : c));
    return node;
  }

  function select(label, options, value) {
    const s = el("select", { "aria-label": label });
    Object.entries(options).forEach(([v, text]) => s.appendChild(el("option", { value: v, text })));
    s.value = value;
    return s;
  }

  const playsLoading = {};
  async function loadPlay(name) {
    window.bookTrainPlays = window.bookTrainPlays || {};
    if (!window.bookTrainPlays[name]) {
      playsLoading[name] = playsLoading[name] || new Promise((resolve, reject) => {
        const tag = document.createElement("script");
        tag.src = BASE + "plays/" + name + ".js";
        tag.onload = resolve;
        tag.onerror = () => reject(new Error("could not load " + tag.src));
        document.head.appendChild(tag);
      });
      await playsLoading[name];
    }
    const payload = window.bookTrainPlays[name];
    const binary = atob(payload.data), bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new TextDecoder().decode(await new Response(stream).arrayBuffer());
  }

  /* The trainer in a Web Worker whose program is this file's bookTrainCore (a Blob URL, which
   * file:// allows); where no worker starts, the same driver in the page, in slices of 25 ms. */
  function startDriver(onMessage) {
    try {
      const source = '"use strict";\nconst core = (' + bookTrainCore.toString() + ")();\ncore.workerMain(self);\n";
      const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
      const worker = new Worker(url);
      worker.onmessage = (e) => onMessage(e.data);
      return { mode: "worker", send: (m) => worker.postMessage(m), stop: () => { worker.terminate(); URL.revokeObjectURL(url); } };
    } catch (e) {
      let stopped = false;
      const driver = core.makeDriver((m) => { if (!stopped) onMessage(m); }, 25);
      return { mode: "page", send: (m) => driver.handle(m), stop: () => { stopped = true; driver.handle({ type: "pause" }); } };
    }
  }

  function drawLosses(canvas, state) {
    const ctx = canvas.getContext("2d"), W = canvas.width, Hh = canvas.height;
    const left = 44, bottom = 26, top = 8, right = 8;
    const steps = state.steps || 1, lo = 1.0, hi = 4.6;
    const X = (t) => left + (W - left - right) * t / steps;
    const Y = (v) => top + (Hh - top - bottom) * (hi - Math.max(lo, Math.min(hi, v))) / (hi - lo);
    ctx.clearRect(0, 0, W, Hh);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, Hh);
    ctx.strokeStyle = "#999"; ctx.fillStyle = "#333"; ctx.font = "11px sans-serif"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(left, top); ctx.lineTo(left, Hh - bottom); ctx.lineTo(W - right, Hh - bottom); ctx.stroke();
    for (let v = 1; v <= 4; v++) { ctx.fillText(v.toFixed(0), left - 14, Y(v) + 4); }
    ctx.fillText("nats/char", 2, top + 10);
    ctx.fillText("step " + steps, W - right - 52, Hh - 8);
    ctx.fillText("0", left, Hh - 8);
    if (state.chance) { // the uniform guess over the play's symbols
      ctx.setLineDash([4, 4]); ctx.beginPath(); ctx.moveTo(left, Y(state.chance)); ctx.lineTo(W - right, Y(state.chance)); ctx.stroke(); ctx.setLineDash([]);
    }
    const line = (points, colour, width) => {
      ctx.strokeStyle = colour; ctx.lineWidth = width; ctx.beginPath();
      points.forEach(([t, v], i) => (i ? ctx.lineTo(X(t), Y(v)) : ctx.moveTo(X(t), Y(v))));
      ctx.stroke();
    };
    line(state.train, "rgba(31, 119, 180, 0.35)", 1);
    // a mean over the last 20 steps, easier to read than single batches
    const mean = state.train.map(([t], i) => {
      const from = Math.max(0, i - 19), part = state.train.slice(from, i + 1);
      return [t, part.reduce((a, [, v]) => a + v, 0) / part.length];
    });
    line(mean, "#1f77b4", 2);
    line(state.heldOut, "#d62728", 2);
    ctx.fillStyle = "#1f77b4"; ctx.fillText("training (mean of 20 steps)", W - right - 230, top + 12);
    ctx.fillStyle = "#d62728"; ctx.fillText("held out", W - right - 60, top + 12);
  }

  function drawAttention(canvas, attention) {
    const ctx = canvas.getContext("2d"), L = attention.size, cell = Math.floor(canvas.width / L);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
    for (let n = 0; n < L; n++) {
      let max = 0;
      for (let m = 0; m <= n; m++) max = Math.max(max, attention.weights[n * L + m]);
      for (let m = 0; m < L; m++) {
        const a = attention.weights[n * L + m];
        ctx.fillStyle = m > n ? "#eee" : "rgba(220, 80, 20, " + (max ? a / max : 0).toFixed(3) + ")";
        ctx.fillRect(m * cell, n * cell, cell - 1, cell - 1);
      }
    }
  }

  const widgets = [];

  function widget(root) {
    const size = select("model size", Object.fromEntries(Object.entries(PRESETS).map(([k, v]) => [k, v.label])), "large");
    const play = select("play", PLAYS, "hamlet");
    const seed = el("input", { type: "number", min: 0, value: 1, "aria-label": "seed", style: "width: 5em" });
    const train = el("button", { type: "button", class: "bt-train", text: "Train" });
    const pause = el("button", { type: "button", class: "bt-pause", text: "Pause", disabled: "" });
    const reset = el("button", { type: "button", class: "bt-reset", text: "Reset", disabled: "" });
    const status = el("span", { class: "bt-status", role: "status", text: "Press Train: the page builds the model and learns from the play (about 0.1-0.2 MB of text, loaded now)." });
    const plot = el("canvas", { width: 520, height: 240, class: "bt-plot", "aria-label": "training and held-out loss" });
    const heat = el("canvas", { width: 256, height: 256, class: "bt-attention", "aria-label": "one head's attention" });
    const blockSel = select("block", { 0: "block 1", 1: "block 2" }, "0");
    const headSel = select("head", { 0: "head 1", 1: "head 2", 2: "head 3", 3: "head 4" }, "0");
    const attentionText = el("div", { class: "bt-caption" });
    const sample = el("div", { class: "bt-sample", "aria-live": "off" });
    root.textContent = "";
    root.appendChild(el("div", { class: "bt-row" }, "model ", size, " play ", play, " seed ", seed, train, pause, reset));
    root.appendChild(el("div", { class: "bt-row" }, status));
    root.appendChild(el("div", { class: "bt-row" },
      el("div", {}, el("div", { class: "bt-caption", text: "loss per character: training batches (blue), held-out tenth of the play (red), uniform guess (dashed)" }), plot),
      el("div", {}, el("div", { class: "bt-caption", text: "attention A[n', n] on held-out text: row n reads column n'" }), blockSel, headSel, heat, attentionText)));
    root.appendChild(el("div", { class: "bt-caption", text: "a sample (temperature 1) every few seconds:" }));
    root.appendChild(el("div", { class: "bt-row" }, sample));

    const state = { train: [], heldOut: [], steps: 0, chance: 0, driver: null, running: false, messages: [] };
    widgets.push(state);
    const waiting = {};

    function onMessage(m) {
      if (m.type === "ready") {
        Object.assign(state, { steps: m.steps, chance: Math.log(m.symbols), parameters: m.parameters, config: m.config });
      } else if (m.type === "step") {
        state.train.push([m.step, m.loss]);
        state.tokens = m.tokens; state.seconds = m.seconds;
        if (m.step % 5 === 0 || m.step === state.steps) {
          status.textContent = "step " + m.step + " of " + state.steps + ", " + state.parameters.toLocaleString("en") +
            " parameters, " + Math.round(m.tokens / Math.max(m.seconds, 1e-3)).toLocaleString("en") + " characters per second (" + state.driver.mode + ")";
          drawLosses(plot, state);
        }
      } else if (m.type === "heldOut") {
        state.heldOut.push([m.step, m.loss]);
        drawLosses(plot, state);
      } else if (m.type === "sample") {
        sample.textContent = "after step " + m.step + ":\n" + m.prompt + m.text;
        drawAttention(heat, m.attention);
        attentionText.textContent = JSON.stringify(m.attention.text);
        state.lastSample = m;
      } else if (m.type === "done") {
        state.running = false;
        pause.disabled = true;
        status.textContent += " - done";
      }
      if (waiting[m.type]) { waiting[m.type](m); delete waiting[m.type]; }
    }

    state.request = (type) => new Promise((resolve) => { waiting[type] = resolve; state.driver.send({ type }); });

    async function start(record) {
      train.disabled = true;
      [size, play, seed].forEach((c) => (c.disabled = true));
      status.textContent = "Loading the play...";
      let text;
      try { text = await loadPlay(play.value); } catch (e) {
        status.textContent = "Could not load the play: " + e.message;
        train.disabled = false;
        return;
      }
      Object.assign(state, { train: [], heldOut: [], running: true });
      state.driver = startDriver(onMessage);
      const preset = PRESETS[size.value];
      blockSel.querySelectorAll("option").forEach((o) => (o.disabled = +o.value >= preset.config.num_blocks));
      if (+blockSel.value >= preset.config.num_blocks) blockSel.value = "0";
      state.driver.send({ type: "view", block: +blockSel.value, head: +headSel.value });
      state.driver.send({ type: "start", text, preset: { config: preset.config, recipe: preset.recipe },
        seed: Math.max(0, Math.floor(+seed.value || 0)), record: record || 0 });
      pause.disabled = false; reset.disabled = false; pause.textContent = "Pause";
    }

    train.addEventListener("click", () => start(state.record));
    pause.addEventListener("click", () => {
      if (!state.driver) return;
      state.running = !state.running;
      state.driver.send({ type: state.running ? "resume" : "pause" });
      pause.textContent = state.running ? "Pause" : "Resume";
    });
    reset.addEventListener("click", () => {
      if (state.driver) state.driver.stop();
      Object.assign(state, { driver: null, running: false, train: [], heldOut: [] });
      [size, play, seed].forEach((c) => (c.disabled = false));
      train.disabled = false; pause.disabled = true; reset.disabled = true; pause.textContent = "Pause";
      sample.textContent = "";
      status.textContent = "Reset: choose a size, a play and a seed, then press Train.";
      drawLosses(plot, state);
    });
    [blockSel, headSel].forEach((c) => c.addEventListener("change", () => {
      if (state.driver) state.driver.send({ type: "view", block: +blockSel.value, head: +headSel.value });
    }));
    drawLosses(plot, state);
  }

  function init() {
    document.querySelectorAll("div.book-train").forEach((root) => {
      if (root.dataset.ready) return;
      root.dataset.ready = "1";
      widget(root);
    });
  }

  window.bookTrain = Object.assign(core, { bookTrainCore, PRESETS, PLAYS, widgets, loadPlay, init });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
