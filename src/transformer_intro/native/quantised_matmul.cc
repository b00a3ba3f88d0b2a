// Y = X W^T for N vectors X (N, in) and a matrix W (rows, in) kept in a GGUF block format, called
// from compiled JAX programs through jax.ffi (transformer_intro.quantisation builds and loads it).
//
// Each row of W is cut into blocks of 32 weights along the input axis:
//   Q8_0: 32 int8 codes q and a float16 scale d per block: w = d q;
//   Q4_1: 16 bytes of 4-bit codes (the block's first 16 weights in the low nibbles, the next 16
//         in the high ones), a float16 scale d and a float16 minimum m per block: w = d q + m.
// The codes are one array (rows, in) or (rows, in / 2); scales and minima arrays (rows, in / 32).
// A scanned model stacks its M blocks' matrices along a leading axis: the kernel is given the whole
// stack and the index of one matrix, and reads that matrix where it lies (a slice of the stack,
// taken by XLA, would be a copy of the matrix before every product).
//
// A block is turned back into 32 floats once and multiplied by the same 32 inputs of every one of
// the N vectors, so W streams from memory once however many vectors there are: decoding (N = 1)
// is limited by how fast the weights are read, and reads 4 to 7 times fewer bytes than float32.
// Products are summed in eight float32 lanes (AVX2 and FMA, explicit: the same instructions, so
// the same sums, on every x86-64 processor that has them), added up at the end.
// The rows are shared among XLA's own threads (Helpers, below) when the work is large enough to
// pay for them.
//
// The *_q8_0_vectors targets first round each vector to Q8_0 blocks of its own (per block of 32
// inputs, a float32 scale e = max |x| / 127 and codes r = round(x / e)), as llama.cpp does, and
// then sum the integer products q r of a block exactly in 32-bit integers (AVX2's maddubs: 32
// multiply-adds in two instructions, against eight per FMA), scaling each block's sum by d e once
// (and adding m e sum r for Q4_1's minima). The answer is the product of the dequantised matrix with
// the dequantised vector, about twice as fast, and no longer that of the float vector itself.

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kBlock = 32;
// From about 130,000 multiply-adds (a 576 x 576 matrix times one vector is 330,000) the second
// core saves more than starting and joining the threads costs: on a 2-core Xeon, SmolLM2 decoded
// 56 tokens/s with this threshold and 43 with a million, where only the token table was shared.
constexpr int64_t kParallelFrom = 1 << 17;

// One product's rows, cut into parts that any thread may take, one at a time.
struct Job {
  std::function<void(int64_t, int64_t)> work;  // rows [begin, end)
  int64_t rows, parts;
  std::atomic<int64_t> next{0}, done{0};
  Job(std::function<void(int64_t, int64_t)> w, int64_t r, int64_t p)
      : work(std::move(w)), rows(r), parts(p) {}
  void TakeParts() {
    for (int64_t p; (p = next.fetch_add(1)) < parts;) {
      work(p * rows / parts, (p + 1) * rows / parts);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

// The product now on offer, and the helpers: tasks on XLA's own thread pool (the threads that
// run the rest of the program) that take parts of it. A helper that has run out of parts waits
// a little, spinning, for the next product before it returns to the pool: decoding calls the
// kernel about 200 times per token with a few microseconds between calls, and a thread woken
// from sleep for every call would arrive after most of the work was done. A second team of
// threads, as OpenMP's, would instead spin beside XLA's on the same cores, taking turns with
// them.
class Helpers {
 public:
  static Helpers& Get() {  // never destroyed: a helper may still be waiting at the exit
    static Helpers* helpers = new Helpers;
    return *helpers;
  }

  // Offers the job to the helpers, asking the pool for more when fewer than wanted are alive.
  void Offer(const std::shared_ptr<Job>& job, ffi::ThreadPool& pool, int64_t wanted) {
    offering_ = true;
    struct Done {
      ~Done() { offering_ = false; }
    } done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      offered_ = job;
    }
    offers_.fetch_add(1, std::memory_order_release);
    for (int64_t alive = alive_.load(); alive < wanted; alive = alive_.load()) {
      if (alive_.compare_exchange_weak(alive, alive + 1)) pool.Schedule([this] { Help(); });
    }
  }

  void Withdraw(const std::shared_ptr<Job>& job) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (offered_ == job) offered_.reset();
  }

 private:
  static constexpr auto kWait = std::chrono::microseconds(300);

  void Help() {
    if (offering_) {  // the pool ran this task at once, on the offering thread: no waiting
      alive_.fetch_sub(1);
      return;
    }
    uint64_t seen = 0;
    for (;;) {
      seen = offers_.load(std::memory_order_acquire);
      std::shared_ptr<Job> job;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job = offered_;
      }
      if (job) job->TakeParts();
      const auto until = std::chrono::steady_clock::now() + kWait;
      bool offered = false;
      for (int spins = 0; !offered; ++spins) {
        offered = offers_.load(std::memory_order_acquire) != seen;
        if (!offered && spins % 64 == 63 && std::chrono::steady_clock::now() > until) break;
        _mm_pause();
      }
      if (!offered) break;
    }
    alive_.fetch_sub(1);
  }

  // True while this thread offers a job: a pool that cannot take a task runs it at once, here.
  static thread_local bool offering_;
  std::mutex mutex_;
  std::shared_ptr<Job> offered_;
  std::atomic<uint64_t> offers_{0};
  std::atomic<int64_t> alive_{0};
};

thread_local bool Helpers::offering_ = false;

// At most TRANSFORMER_INTRO_KERNEL_THREADS threads work on one product (unset: all of XLA's).
// The test suite asks for one, as it runs two processes on two cores: a helper waiting for the
// core the other process holds would hold up every product it has taken a part of.
int64_t ThreadLimit() {
  static const int64_t limit = [] {
    const char* asked = std::getenv("TRANSFORMER_INTRO_KERNEL_THREADS");
    const long value = asked ? std::strtol(asked, nullptr, 10) : 0;
    return value > 0 ? static_cast<int64_t>(value) : INT64_MAX;
  }();
  return limit;
}

// work(begin, end) for the rows [0, rows): the calling thread takes parts too, and waits only
// for parts already taken, so no thread waits on one that has not started, and two products
// offered at once by two of XLA's threads each finish (the helpers join the later one).
void ForRows(ffi::ThreadPool& pool, int64_t rows, bool large,
             const std::function<void(int64_t, int64_t)>& work) {
  const int64_t threads = large ? std::min(pool.num_threads(), ThreadLimit()) : 1;
  if (threads < 2 || rows < 2) {
    work(int64_t{0}, rows);
    return;
  }
  auto job = std::make_shared<Job>(work, rows, std::min<int64_t>(rows, 8 * threads));
  Helpers& helpers = Helpers::Get();
  helpers.Offer(job, pool, threads - 1);
  job->TakeParts();
  for (int spins = 0; job->done.load(std::memory_order_acquire) < job->parts; ++spins) {
    if (spins < 4096) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
  helpers.Withdraw(job);
}

inline __m256 Float(__m256i integers) { return _mm256_cvtepi32_ps(integers); }

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// Unsigned bytes u times signed bytes s, summed four at a time into eight 32-bit lanes: exact
// sums, since a pair of products is at most 2 x 128 x 127, within maddubs's int16. Where the
// library is built for AVX-512's VNNI (quantisation.py builds it so on processors that have it),
// one instruction does both steps: the same exact sums, in half the instructions.
inline __m256i FourProducts(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

inline __m256 Halves8(const uint16_t* h) {  // eight float16 numbers as float32
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}

inline int32_t Sum(__m256i v) {
  __m128i four = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  four = _mm_hadd_epi32(four, four);
  return _mm_cvtsi128_si32(_mm_hadd_epi32(four, four));
}

// Eight vectors of eight 32-bit sums -> one vector of their eight totals, in order.
inline __m256i Totals(const __m256i p[8]) {
  const __m256i low = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i high = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(low, high, 0x20),
                          _mm256_permute2x128_si256(low, high, 0x31));
}

inline float Sum(__m256 v) {  // the eight lanes added
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  four = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(four, _mm_movehdup_ps(four)));
}

// The 32 codes of block b of row i as four vectors of eight floats, and the block's scale (and
// minimum). A block's share of a product is d (sum_k q_k x_k) (+ m sum_k x_k): the codes are
// multiplied by x as they are, the scale once per block.
struct Q8_0Blocks {
  static constexpr bool kMinima = false;
  const int8_t* codes;
  const uint16_t* scales;
  int64_t in;
  void Codes(int64_t i, int64_t b, __m256 q[4]) const {
    const int8_t* block = codes + i * in + b * kBlock;
    for (int k = 0; k < 4; ++k) {
      const __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 8 * k));
      q[k] = Float(_mm256_cvtepi8_epi32(eight));
    }
  }
  float Scale(int64_t i, int64_t b) const { return HalfToFloat(scales[i * (in / kBlock) + b]); }
  float Minimum(int64_t, int64_t) const { return 0.0f; }
  // The 32 codes as bytes, for products with a vector's codes r: sum_k q_k r_k in 32-bit lanes
  // (maddubs multiplies unsigned by signed bytes, so |q| by r with q's sign).
  __m256i Bytes(int64_t i, int64_t b) const {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + i * in + b * kBlock));
  }
  static __m256i Products(__m256i q, __m256i r) {
    return FourProducts(_mm256_sign_epi8(q, q), _mm256_sign_epi8(r, q));
  }
  __m256 Scales8(int64_t i, int64_t b) const { return Halves8(scales + i * (in / kBlock) + b); }
  __m256 Minima8(int64_t, int64_t) const { return _mm256_setzero_ps(); }
};

struct Q4_1Blocks {
  static constexpr bool kMinima = true;
  const uint8_t* codes;
  const uint16_t* scales;
  const uint16_t* minima;
  int64_t in;
  void Codes(int64_t i, int64_t b, __m256 q[4]) const {
    const __m128i bytes = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(codes + i * (in / 2) + b * (kBlock / 2)));
    const __m128i nibble = _mm_set1_epi8(0x0F);
    const __m128i low = _mm_and_si128(bytes, nibble);                       // codes 0..15
    const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);  // codes 16..31
    q[0] = Float(_mm256_cvtepu8_epi32(low));
    q[1] = Float(_mm256_cvtepu8_epi32(_mm_srli_si128(low, 8)));
    q[2] = Float(_mm256_cvtepu8_epi32(high));
    q[3] = Float(_mm256_cvtepu8_epi32(_mm_srli_si128(high, 8)));
  }
  float Scale(int64_t i, int64_t b) const { return HalfToFloat(scales[i * (in / kBlock) + b]); }
  float Minimum(int64_t i, int64_t b) const {
    return HalfToFloat(minima[i * (in / kBlock) + b]);
  }
  __m256i Bytes(int64_t i, int64_t b) const {
    const __m128i bytes = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(codes + i * (in / 2) + b * (kBlock / 2)));
    const __m128i nibble = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble),
                            _mm_and_si128(bytes, nibble));
  }
  static __m256i Products(__m256i q, __m256i r) {  // codes 0..15: unsigned as they are
    return FourProducts(q, r);
  }
  __m256 Scales8(int64_t i, int64_t b) const { return Halves8(scales + i * (in / kBlock) + b); }
  __m256 Minima8(int64_t i, int64_t b) const { return Halves8(minima + i * (in / kBlock) + b); }
};

// y[g * rows + i] = sum_j W[i, j] x[g * in + j] for the G vectors from x on, row i alone;
// block_sums[g * blocks + b] is the sum of vector g's inputs in block b (for the minima). Each
// block's products are summed on their own and then scaled into the vector's total, so the only
// chain of additions that runs from block to block is that one.
template <int G, class Blocks>
inline void RowTimesVectors(const Blocks& weights, int64_t i, const float* x,
                            const float* block_sums, int64_t in, int64_t rows, float* y) {
  const int64_t blocks = in / kBlock;
  __m256 total[G];
  for (int g = 0; g < G; ++g) total[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256 q[4];
    weights.Codes(i, b, q);
    const __m256 d = _mm256_set1_ps(weights.Scale(i, b));
    for (int g = 0; g < G; ++g) {
      const float* xb = x + g * in + b * kBlock;
      __m256 block = _mm256_mul_ps(q[0], _mm256_loadu_ps(xb));
      block = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(xb + 8), block);
      block = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(xb + 16), block);
      block = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xb + 24), block);
      total[g] = _mm256_fmadd_ps(d, block, total[g]);
    }
  }
  for (int g = 0; g < G; ++g) {
    float minima = 0.0f;
    if constexpr (Blocks::kMinima) {
      for (int64_t b = 0; b < blocks; ++b) minima += weights.Minimum(i, b) * block_sums[g * blocks + b];
    }
    y[g * rows + i] = Sum(total[g]) + minima;
  }
}

// y[t * rows + i] = sum_j W[i, j] x[t * in + j] for t < n: each row is read once from memory and
// multiplied by the vectors eight at a time (the rest four, two, one at a time) while it is in
// the core's cache.
template <class Blocks>
void MatMul(ffi::ThreadPool& pool, const Blocks& weights, const float* x, int64_t n, int64_t in,
            int64_t rows, float* y) {
  const int64_t blocks = in / kBlock;
  std::vector<float> block_sums(Blocks::kMinima ? n * blocks : 0);
  for (size_t s = 0; s < block_sums.size(); ++s) {
    float sum = 0.0f;
    for (int k = 0; k < kBlock; ++k) sum += x[s * kBlock + k];
    block_sums[s] = sum;
  }
  const float* sums = block_sums.data();
  ForRows(pool, rows, n * rows * in >= kParallelFrom, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t t = 0;
      for (; n - t >= 8; t += 8) {
        RowTimesVectors<8>(weights, i, x + t * in, sums + t * blocks, in, rows, y + t * rows);
      }
      if (n - t >= 4) {
        RowTimesVectors<4>(weights, i, x + t * in, sums + t * blocks, in, rows, y + t * rows);
        t += 4;
      }
      if (n - t >= 2) {
        RowTimesVectors<2>(weights, i, x + t * in, sums + t * blocks, in, rows, y + t * rows);
        t += 2;
      }
      if (n - t >= 1) {
        RowTimesVectors<1>(weights, i, x + t * in, sums + t * blocks, in, rows, y + t * rows);
      }
    }
  });
}

// N vectors in Q8_0 blocks of their own: codes r (N, in), and per block the scale e and e sum r.
struct QuantisedVectors {
  std::vector<int8_t> codes;
  std::vector<float> scales, sums;
  QuantisedVectors(const float* x, int64_t n, int64_t in)
      : codes(n * in), scales(n * in / kBlock), sums(n * in / kBlock) {
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int64_t s = 0; s < n * in / kBlock; ++s) {
      __m256 xb[4], largest = _mm256_setzero_ps();
      for (int k = 0; k < 4; ++k) {
        xb[k] = _mm256_loadu_ps(x + s * kBlock + 8 * k);
        largest = _mm256_max_ps(largest, _mm256_and_ps(xb[k], magnitude));
      }
      __m128 four = _mm_max_ps(_mm256_castps256_ps128(largest), _mm256_extractf128_ps(largest, 1));
      four = _mm_max_ps(four, _mm_movehl_ps(four, four));
      const float e = _mm_cvtss_f32(_mm_max_ss(four, _mm_movehdup_ps(four))) / 127.0f;
      const __m256 inverse = _mm256_set1_ps(e != 0.0f ? 1.0f / e : 0.0f);
      __m256i r[4];  // rounded to nearest, halves to even (the default mode), as jnp.round
      for (int k = 0; k < 4; ++k) r[k] = _mm256_cvtps_epi32(_mm256_mul_ps(xb[k], inverse));
      const __m256i total = _mm256_add_epi32(_mm256_add_epi32(r[0], r[1]), _mm256_add_epi32(r[2], r[3]));
      // 32 int32 -> 32 int8 in order: the packs work within 128-bit halves, the permute mends it
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
      const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes.data() + s * kBlock), ordered);
      scales[s] = e;
      sums[s] = e * static_cast<float>(Sum(total));
    }
  }
};

// y[g * rows + i] for the G quantised vectors from t on, row i alone. Blocks go eight at a time:
// their eight integer sums become one vector, scaled by the eight d e at once (and the minima's
// eight m e sum r added), so no block needs a scalar step.
template <int G, class Blocks>
inline void RowTimesQuantisedVectors(const Blocks& weights, int64_t i, const QuantisedVectors& v,
                                     int64_t t, int64_t in, int64_t rows, float* y) {
  const int64_t blocks = in / kBlock;
  __m256 total[G];
  float rest[G];
  for (int g = 0; g < G; ++g) total[g] = _mm256_setzero_ps(), rest[g] = 0.0f;
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    __m256i q[8];
    for (int k = 0; k < 8; ++k) q[k] = weights.Bytes(i, b + k);
    const __m256 d = weights.Scales8(i, b), m = weights.Minima8(i, b);
    for (int g = 0; g < G; ++g) {
      const int64_t s = (t + g) * blocks + b;  // the vector's block b
      __m256i p[8];
      for (int k = 0; k < 8; ++k) {
        const auto* r = reinterpret_cast<const __m256i*>(v.codes.data() + (s + k) * kBlock);
        p[k] = Blocks::Products(q[k], _mm256_loadu_si256(r));
      }
      const __m256 de = _mm256_mul_ps(d, _mm256_loadu_ps(v.scales.data() + s));
      total[g] = _mm256_fmadd_ps(de, _mm256_cvtepi32_ps(Totals(p)), total[g]);
      if constexpr (Blocks::kMinima) {
        total[g] = _mm256_fmadd_ps(m, _mm256_loadu_ps(v.sums.data() + s), total[g]);
      }
    }
  }
  for (; b < blocks; ++b) {  // the last blocks, when fewer than eight
    const __m256i q = weights.Bytes(i, b);
    const float d = weights.Scale(i, b), m = weights.Minimum(i, b);
    for (int g = 0; g < G; ++g) {
      const int64_t s = (t + g) * blocks + b;
      const auto* r = reinterpret_cast<const __m256i*>(v.codes.data() + s * kBlock);
      const int32_t qr = Sum(Blocks::Products(q, _mm256_loadu_si256(r)));
      rest[g] += d * v.scales[s] * static_cast<float>(qr) + m * v.sums[s];
    }
  }
  for (int g = 0; g < G; ++g) y[(t + g) * rows + i] = Sum(total[g]) + rest[g];
}

template <class Blocks>
void MatMulQuantisedVectors(ffi::ThreadPool& pool, const Blocks& weights, const float* x,
                            int64_t n, int64_t in, int64_t rows, float* y) {
  const QuantisedVectors v(x, n, in);
  ForRows(pool, rows, n * rows * in >= kParallelFrom, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t t = 0;
      for (; n - t >= 4; t += 4) RowTimesQuantisedVectors<4>(weights, i, v, t, in, rows, y);
      if (n - t >= 2) {
        RowTimesQuantisedVectors<2>(weights, i, v, t, in, rows, y);
        t += 2;
      }
      if (n - t >= 1) RowTimesQuantisedVectors<1>(weights, i, v, t, in, rows, y);
    }
  });
}

// The sizes of the product, from the buffers; false when they do not agree. x is (..., in). The
// codes hold L matrices of `rows` rows one after another (L = 1 for a matrix of its own, L = M for
// a scanned model's stacked blocks), with leading sizes of 1 (jax.vmap's "expand_dims"); `layer`
// is one int32, the index of the matrix to multiply, which is read where it lies in the stack.
bool Sizes(const ffi::AnyBuffer& x, const ffi::AnyBuffer& layer, const ffi::AnyBuffer& codes,
           int64_t codes_per_byte, const ffi::AnyBuffer& scales, int64_t y_count, int64_t& n,
           int64_t& in, int64_t& rows, int64_t& index) {
  if (x.element_type() != ffi::DataType::F32 || scales.element_type() != ffi::DataType::F16 ||
      layer.element_type() != ffi::DataType::S32 || layer.element_count() != 1) {
    return false;
  }
  const auto x_dims = x.dimensions();
  if (x_dims.size() == 0) return false;
  in = x_dims.back();
  if (in == 0 || in % kBlock != 0) return false;
  n = static_cast<int64_t>(x.element_count()) / in;
  rows = index = 0;
  if (n == 0) return y_count == 0;  // no vectors: nothing to multiply
  if (y_count == 0 || y_count % n != 0) return false;
  rows = y_count / n;
  const int64_t per_matrix = rows * (in / codes_per_byte);
  const int64_t codes_count = static_cast<int64_t>(codes.element_count());
  if (codes_count == 0 || codes_count % per_matrix != 0) return false;
  const int64_t matrices = codes_count / per_matrix;
  index = *static_cast<const int32_t*>(layer.untyped_data());
  return 0 <= index && index < matrices &&
         static_cast<int64_t>(scales.element_count()) == matrices * rows * (in / kBlock);
}

// y = X W^T, with X as it is or first rounded to Q8_0 blocks.
template <bool kQuantisedVectors, class Blocks>
void Product(ffi::ThreadPool& pool, const Blocks& weights, const ffi::AnyBuffer& x, int64_t n,
             int64_t in, int64_t rows, ffi::Result<ffi::AnyBuffer>& y) {
  const float* vectors = static_cast<const float*>(x.untyped_data());
  float* out = static_cast<float*>(y->untyped_data());
  if constexpr (kQuantisedVectors) {
    MatMulQuantisedVectors(pool, weights, vectors, n, in, rows, out);
  } else {
    MatMul(pool, weights, vectors, n, in, rows, out);
  }
}

template <bool kQuantisedVectors>
ffi::Error Q8_0Impl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer layer,
                    ffi::AnyBuffer codes, ffi::AnyBuffer scales, ffi::Result<ffi::AnyBuffer> y) {
  int64_t n, in, rows, index;
  if (codes.element_type() != ffi::DataType::S8 ||
      !Sizes(x, layer, codes, 1, scales, static_cast<int64_t>(y->element_count()), n, in, rows,
             index)) {
    return ffi::Error::InvalidArgument(
        "Q8_0 product: the types or shapes of x, layer, codes and scales disagree");
  }
  const int64_t blocks = rows * (in / kBlock);  // of one matrix
  const Q8_0Blocks weights{static_cast<const int8_t*>(codes.untyped_data()) + index * rows * in,
                           static_cast<const uint16_t*>(scales.untyped_data()) + index * blocks,
                           in};
  Product<kQuantisedVectors>(pool, weights, x, n, in, rows, y);
  return ffi::Error::Success();
}

template <bool kQuantisedVectors>
ffi::Error Q4_1Impl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer layer,
                    ffi::AnyBuffer codes, ffi::AnyBuffer scales, ffi::AnyBuffer minima,
                    ffi::Result<ffi::AnyBuffer> y) {
  int64_t n, in, rows, index;
  if (codes.element_type() != ffi::DataType::U8 || minima.element_type() != ffi::DataType::F16 ||
      minima.element_count() != scales.element_count() ||
      !Sizes(x, layer, codes, 2, scales, static_cast<int64_t>(y->element_count()), n, in, rows,
             index)) {
    return ffi::Error::InvalidArgument(
        "Q4_1 product: the types or shapes of x, layer, codes, scales and minima disagree");
  }
  const int64_t blocks = rows * (in / kBlock);  // of one matrix
  const Q4_1Blocks weights{
      static_cast<const uint8_t*>(codes.untyped_data()) + index * rows * (in / 2),
      static_cast<const uint16_t*>(scales.untyped_data()) + index * blocks,
      static_cast<const uint16_t*>(minima.untyped_data()) + index * blocks, in};
  Product<kQuantisedVectors>(pool, weights, x, n, in, rows, y);
  return ffi::Error::Success();
}

// The kernels' arguments: XLA's thread pool, x, the layer, codes and scales (and Q4_1's minima),
// then the result.
auto Inputs() {
  return ffi::Ffi::Bind()
      .Ctx<ffi::ThreadPool>()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::AnyBuffer>();
}
auto Q8_0Arguments() { return Inputs().Ret<ffi::AnyBuffer>(); }
auto Q4_1Arguments() { return Inputs().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>(); }

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(Q8_0MatMul, Q8_0Impl<false>, Q8_0Arguments());
XLA_FFI_DEFINE_HANDLER_SYMBOL(Q4_1MatMul, Q4_1Impl<false>, Q4_1Arguments());
XLA_FFI_DEFINE_HANDLER_SYMBOL(Q8_0MatMulQ8_0Vectors, Q8_0Impl<true>, Q8_0Arguments());
XLA_FFI_DEFINE_HANDLER_SYMBOL(Q4_1MatMulQ8_0Vectors, Q4_1Impl<true>, Q4_1Arguments());
