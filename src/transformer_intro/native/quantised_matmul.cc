// Y = X W^T for N vectors X (N, in) and a matrix W (rows, in) kept in a GGUF block format, called
// from compiled JAX programs through jax.ffi (transformer_intro.quantisation builds and loads it).
//
// Each row of W is cut into blocks of 32 weights along the input axis:
//   Q8_0: 32 int8 codes q and a float16 scale d per block: w = d q;
//   Q4_1: 16 bytes of 4-bit codes (the block's first 16 weights in the low nibbles, the next 16
//         in the high ones), a float16 scale d and a float16 minimum m per block: w = d q + m.
// The codes are one array (rows, in) or (rows, in / 2); scales and minima arrays (rows, in / 32).
//
// A block is turned back into 32 floats once and multiplied by the same 32 inputs of every one of
// the N vectors, so W streams from memory once however many vectors there are: decoding (N = 1)
// is limited by how fast the weights are read, and reads 4 to 7 times fewer bytes than float32.
// Products are summed in eight float32 lanes (AVX2 and FMA, explicit: the same instructions, so
// the same sums, on every x86-64 processor that has them), added up at the end.
// The rows are shared among OpenMP's threads when the work is large enough to pay for them.

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kBlock = 32;
// From about 130,000 multiply-adds (a 576 x 576 matrix times one vector is 330,000) the second
// core saves more than starting and joining the threads costs: on a 2-core Xeon, SmolLM2 decoded
// 56 tokens/s with this threshold and 43 with a million, where only the token table was shared.
constexpr int64_t kParallelFrom = 1 << 17;

inline __m256 Float(__m256i integers) { return _mm256_cvtepi32_ps(integers); }

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

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
void MatMul(const Blocks& weights, const float* x, int64_t n, int64_t in, int64_t rows, float* y) {
  const int64_t blocks = in / kBlock;
  std::vector<float> block_sums(Blocks::kMinima ? n * blocks : 0);
  for (size_t s = 0; s < block_sums.size(); ++s) {
    float sum = 0.0f;
    for (int k = 0; k < kBlock; ++k) sum += x[s * kBlock + k];
    block_sums[s] = sum;
  }
  const float* sums = block_sums.data();
#pragma omp parallel for schedule(static) if (n * rows * in >= kParallelFrom)
  for (int64_t i = 0; i < rows; ++i) {
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
}

// The sizes of the product, from the buffers; false when they do not agree. x is (..., in), the
// codes (..., rows, in / codes_per_byte) with leading sizes of 1 (jax.vmap's "expand_dims").
bool Sizes(const ffi::AnyBuffer& x, const ffi::AnyBuffer& codes, int64_t codes_per_byte,
           const ffi::AnyBuffer& scales, int64_t y_count, int64_t& n, int64_t& in,
           int64_t& rows) {
  if (x.element_type() != ffi::DataType::F32 || scales.element_type() != ffi::DataType::U16) {
    return false;
  }
  const auto x_dims = x.dimensions();
  if (x_dims.size() == 0) return false;
  in = x_dims.back();
  if (in == 0 || in % kBlock != 0) return false;
  n = static_cast<int64_t>(x.element_count()) / in;
  const int64_t codes_count = static_cast<int64_t>(codes.element_count());
  if (codes_count * codes_per_byte % in != 0) return false;
  rows = codes_count * codes_per_byte / in;
  return static_cast<int64_t>(scales.element_count()) == rows * (in / kBlock) &&
         y_count == n * rows;
}

ffi::Error Q8_0Impl(ffi::AnyBuffer x, ffi::AnyBuffer codes, ffi::AnyBuffer scales,
                    ffi::Result<ffi::AnyBuffer> y) {
  int64_t n, in, rows;
  if (codes.element_type() != ffi::DataType::S8 ||
      !Sizes(x, codes, 1, scales, static_cast<int64_t>(y->element_count()), n, in, rows)) {
    return ffi::Error::InvalidArgument("Q8_0 product: the types or shapes of x, codes and scales disagree");
  }
  const Q8_0Blocks weights{static_cast<const int8_t*>(codes.untyped_data()),
                           static_cast<const uint16_t*>(scales.untyped_data()), in};
  MatMul(weights, static_cast<const float*>(x.untyped_data()), n, in, rows,
         static_cast<float*>(y->untyped_data()));
  return ffi::Error::Success();
}

ffi::Error Q4_1Impl(ffi::AnyBuffer x, ffi::AnyBuffer codes, ffi::AnyBuffer scales,
                    ffi::AnyBuffer minima, ffi::Result<ffi::AnyBuffer> y) {
  int64_t n, in, rows;
  if (codes.element_type() != ffi::DataType::U8 || minima.element_type() != ffi::DataType::U16 ||
      minima.element_count() != scales.element_count() ||
      !Sizes(x, codes, 2, scales, static_cast<int64_t>(y->element_count()), n, in, rows)) {
    return ffi::Error::InvalidArgument(
        "Q4_1 product: the types or shapes of x, codes, scales and minima disagree");
  }
  const Q4_1Blocks weights{static_cast<const uint8_t*>(codes.untyped_data()),
                           static_cast<const uint16_t*>(scales.untyped_data()),
                           static_cast<const uint16_t*>(minima.untyped_data()), in};
  MatMul(weights, static_cast<const float*>(x.untyped_data()), n, in, rows,
         static_cast<float*>(y->untyped_data()));
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(Q8_0MatMul, Q8_0Impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(Q4_1MatMul, Q4_1Impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>());
