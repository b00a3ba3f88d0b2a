// y = W x with W kept in GGUF's block formats, for benchmarks/quantised_matvec.py (via jax.ffi).
//
// Q8_0: per block of 32 weights of a row, 32 int8 codes q and one float16 scale d: w = d q.
// Q4_1: per block, 16 bytes of 4-bit codes (the block's first 16 weights in the low nibbles, the
// next 16 in the high ones), a float16 scale d and minimum m: w = d q + m. So the block's share of
// y_i is d (sum_k q_k x_k) + m (sum_k x_k), and the sums of x over each block are made once.
// Q8_0 and Q4_1 with an 8-bit vector: x is rounded per block of 32 to int8 codes and a float scale, as
// llama.cpp does, and each block's sum is taken in integers (AVX2's maddubs and madd).
// The rows of a large matrix are shared among OpenMP's threads. Each row's products are summed in eight float32 lanes
// with AVX2 and FMA (every x86-64 machine this book is tested on has both), added up at the end.

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kBlock = 32;
// Below about a million weights, starting and joining OpenMP's threads costs more than the second
// core saves (576 x 576 Q8_0 codes: 46 us on two threads, 30 us on one, on a 2-core AMD EPYC).
constexpr int64_t kParallelFrom = 1 << 20;

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// x rounded to 8 bits, block by block: codes = round(x / scale), scale = max |x| / 127.
void RoundTo8Bits(const float* xs, int64_t blocks, int8_t* codes, float* scales) {
  for (int64_t b = 0; b < blocks; ++b) {
    float largest = 0.0f;
    for (int k = 0; k < kBlock; ++k) largest = std::fmax(largest, std::fabs(xs[b * kBlock + k]));
    const float scale = largest / 127.0f;
    scales[b] = scale;
    for (int k = 0; k < kBlock; ++k) {
      codes[b * kBlock + k] =
          scale == 0.0f ? 0 : static_cast<int8_t>(std::nearbyint(xs[b * kBlock + k] / scale));
    }
  }
}

// Whether x has `in` numbers, `in` is whole blocks, and each per-block array one per block and row.
bool ShapesAgree(int64_t in, const ffi::Buffer<ffi::F32>& x, int64_t out,
                 std::initializer_list<const ffi::Buffer<ffi::U16>*> per_block) {
  if (in % kBlock != 0 || x.element_count() != static_cast<size_t>(in)) return false;
  for (const auto* array : per_block) {
    if (array->element_count() != static_cast<size_t>(out * (in / kBlock))) return false;
  }
  return true;
}

inline __m256 Widen(__m256i integers) { return _mm256_cvtepi32_ps(integers); }

inline float Sum(__m256 v) {  // the eight lanes added
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  four = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(four, _mm_movehdup_ps(four)));
}

ffi::Error Q8_0Impl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::S8> codes,
                    ffi::Buffer<ffi::U16> scales, ffi::ResultBuffer<ffi::F32> y) {
  const auto dims = codes.dimensions();  // (out, in)
  const int64_t out = dims[0], in = dims[1], blocks = in / kBlock;
  if (!ShapesAgree(in, x, out, {&scales})) {
    return ffi::Error::InvalidArgument("Q8_0: shapes do not agree");
  }
  const float* xs = x.typed_data();
  const int8_t* q = codes.typed_data();
  const uint16_t* d = scales.typed_data();
  float* ys = y->typed_data();
#pragma omp parallel for schedule(static) if (out * in >= kParallelFrom)
  for (int64_t i = 0; i < out; ++i) {
    const int8_t* row = q + i * in;
    __m256 total = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      __m256 sum = _mm256_setzero_ps();
      for (int c = 0; c < kBlock; c += 8) {
        const __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + b * kBlock + c));
        sum = _mm256_fmadd_ps(Widen(_mm256_cvtepi8_epi32(eight)), _mm256_loadu_ps(xs + b * kBlock + c), sum);
      }
      total = _mm256_fmadd_ps(_mm256_set1_ps(HalfToFloat(d[i * blocks + b])), sum, total);
    }
    ys[i] = Sum(total);
  }
  return ffi::Error::Success();
}

ffi::Error Q8_0Q8Impl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::S8> codes,
                      ffi::Buffer<ffi::U16> scales, ffi::ResultBuffer<ffi::F32> y) {
  const auto dims = codes.dimensions();  // (out, in)
  const int64_t out = dims[0], in = dims[1], blocks = in / kBlock;
  if (!ShapesAgree(in, x, out, {&scales})) {
    return ffi::Error::InvalidArgument("Q8_0: shapes do not agree");
  }
  const float* xs = x.typed_data();
  std::vector<int8_t> x_codes(in);
  std::vector<float> x_scales(blocks);
  RoundTo8Bits(xs, blocks, x_codes.data(), x_scales.data());
  const int8_t* q = codes.typed_data();
  const uint16_t* d = scales.typed_data();
  const int8_t* v = x_codes.data();
  const float* dv = x_scales.data();
  float* ys = y->typed_data();
  const __m256i ones = _mm256_set1_epi16(1);
#pragma omp parallel for schedule(static) if (out * in >= kParallelFrom)
  for (int64_t i = 0; i < out; ++i) {
    const int8_t* row = q + i * in;
    __m256 total = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b * kBlock));
      const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + b * kBlock));
      // maddubs multiplies unsigned by signed bytes: |w| times u with w's sign
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(u, w));
      const __m256 sums = Widen(_mm256_madd_epi16(pairs, ones));
      total = _mm256_fmadd_ps(_mm256_set1_ps(HalfToFloat(d[i * blocks + b]) * dv[b]), sums, total);
    }
    ys[i] = Sum(total);
  }
  return ffi::Error::Success();
}

ffi::Error Q4_1Impl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::U8> nibbles,
                    ffi::Buffer<ffi::U16> scales, ffi::Buffer<ffi::U16> minima,
                    ffi::ResultBuffer<ffi::F32> y) {
  const auto dims = nibbles.dimensions();  // (out, in / 2)
  const int64_t out = dims[0], in = 2 * dims[1], blocks = in / kBlock;
  if (!ShapesAgree(in, x, out, {&scales, &minima})) {
    return ffi::Error::InvalidArgument("Q4_1: shapes do not agree");
  }
  const float* xs = x.typed_data();
  const uint8_t* q = nibbles.typed_data();
  const uint16_t* d = scales.typed_data();
  const uint16_t* m = minima.typed_data();
  float* ys = y->typed_data();
  std::vector<float> block_sums(blocks);
  for (int64_t b = 0; b < blocks; ++b) {
    float sum = 0.0f;
    for (int k = 0; k < kBlock; ++k) sum += xs[b * kBlock + k];
    block_sums[b] = sum;
  }
  const float* sx = block_sums.data();
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
#pragma omp parallel for schedule(static) if (out * in >= kParallelFrom)
  for (int64_t i = 0; i < out; ++i) {
    const uint8_t* row = q + i * in / 2;
    __m256 total = _mm256_setzero_ps();
    float minima_total = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * kBlock / 2));
      const __m128i low = _mm_and_si128(bytes, low_nibbles);  // weights 0..15 of the block
      const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibbles);  // 16..31
      const float* xb = xs + b * kBlock;
      __m256 sum = _mm256_mul_ps(Widen(_mm256_cvtepu8_epi32(low)), _mm256_loadu_ps(xb));
      sum = _mm256_fmadd_ps(Widen(_mm256_cvtepu8_epi32(_mm_srli_si128(low, 8))), _mm256_loadu_ps(xb + 8), sum);
      sum = _mm256_fmadd_ps(Widen(_mm256_cvtepu8_epi32(high)), _mm256_loadu_ps(xb + 16), sum);
      sum = _mm256_fmadd_ps(Widen(_mm256_cvtepu8_epi32(_mm_srli_si128(high, 8))), _mm256_loadu_ps(xb + 24), sum);
      const int64_t j = i * blocks + b;
      total = _mm256_fmadd_ps(_mm256_set1_ps(HalfToFloat(d[j])), sum, total);
      minima_total += HalfToFloat(m[j]) * sx[b];
    }
    ys[i] = Sum(total) + minima_total;
  }
  return ffi::Error::Success();
}

ffi::Error Q4_1Q8Impl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::U8> nibbles,
                      ffi::Buffer<ffi::U16> scales, ffi::Buffer<ffi::U16> minima,
                      ffi::ResultBuffer<ffi::F32> y) {
  const auto dims = nibbles.dimensions();  // (out, in / 2)
  const int64_t out = dims[0], in = 2 * dims[1], blocks = in / kBlock;
  if (!ShapesAgree(in, x, out, {&scales, &minima})) {
    return ffi::Error::InvalidArgument("Q4_1: shapes do not agree");
  }
  std::vector<int8_t> x_codes(in);
  std::vector<float> x_scales(blocks), x_sums(blocks);
  RoundTo8Bits(x.typed_data(), blocks, x_codes.data(), x_scales.data());
  for (int64_t b = 0; b < blocks; ++b) {  // the sums of the rounded vector, for the minima
    int total = 0;
    for (int k = 0; k < kBlock; ++k) total += x_codes[b * kBlock + k];
    x_sums[b] = x_scales[b] * static_cast<float>(total);
  }
  const uint8_t* q = nibbles.typed_data();
  const uint16_t* d = scales.typed_data();
  const uint16_t* m = minima.typed_data();
  const int8_t* v = x_codes.data();
  float* ys = y->typed_data();
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
#pragma omp parallel for schedule(static) if (out * in >= kParallelFrom)
  for (int64_t i = 0; i < out; ++i) {
    const uint8_t* row = q + i * in / 2;
    __m256 total = _mm256_setzero_ps();
    float minima_total = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * kBlock / 2));
      const __m256i codes = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibbles),
                                             _mm_and_si128(bytes, low_nibbles));  // 0..31 in order
      const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + b * kBlock));
      const __m256 sums = Widen(_mm256_madd_epi16(_mm256_maddubs_epi16(codes, u), ones));
      const int64_t j = i * blocks + b;
      total = _mm256_fmadd_ps(_mm256_set1_ps(HalfToFloat(d[j]) * x_scales[b]), sums, total);
      minima_total += HalfToFloat(m[j]) * x_sums[b];
    }
    ys[i] = Sum(total) + minima_total;
  }
  return ffi::Error::Success();
}

auto Q8Binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::Buffer<ffi::F32>>()
      .Arg<ffi::Buffer<ffi::S8>>()
      .Arg<ffi::Buffer<ffi::U16>>()
      .Ret<ffi::Buffer<ffi::F32>>();
}

auto Q4Binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::Buffer<ffi::F32>>()
      .Arg<ffi::Buffer<ffi::U8>>()
      .Arg<ffi::Buffer<ffi::U16>>()
      .Arg<ffi::Buffer<ffi::U16>>()
      .Ret<ffi::Buffer<ffi::F32>>();
}

}  // namespace

// Q8_0's kernels take x, the codes (out, in) and the scales (out, in / 32); Q4_1's take x, the
// packed codes (out, in / 2), the scales and the minima (out, in / 32). Each returns y (out).
XLA_FFI_DEFINE_HANDLER_SYMBOL(Q8_0MatVec, Q8_0Impl, Q8Binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(Q8_0Q8MatVec, Q8_0Q8Impl, Q8Binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(Q4_1MatVec, Q4_1Impl, Q4Binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(Q4_1Q8MatVec, Q4_1Q8Impl, Q4Binding());
