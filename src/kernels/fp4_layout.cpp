// FP4 tensors as the GEMMs read them: the values (dequantized, or the exact block products a
// tensor core multiplies) and the transpose of a square-tiled tensor. kernels/fp4.h.
#include <bit>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/fp4.h"
#include "mixp/float_types.h"

namespace mixp::kernels {
namespace {

uint8_t code_at(const uint8_t* packed, int64_t row_bytes, int64_t r, int64_t c) {
  const uint8_t byte = packed[r * row_bytes + c / 2];
  return c % 2 == 0 ? uint8_t(byte & 0xF) : uint8_t(byte >> 4);
}

// The value of a block scale code: E4M3 (nvfp4) or E8M0 (mxfp4); NaN for the NaN codes.
float scale_value(uint8_t code, Fp4Kind kind) {
  return kind == Fp4Kind::nvfp4 ? float(float8_e4m3::from_bits(code)) : e8m0_value(code);
}

// The products of every scale code (256) with every E2M1 code (16) as bf16 bits, entry
// scale * 16 + code (exact, see kernels/fp4.h): one lookup an element.
std::vector<uint16_t> product_table(Fp4Kind kind) {
  std::vector<uint16_t> table(256 * 16);
  for (int s = 0; s < 256; ++s) {
    const float scale = scale_value(uint8_t(s), kind);
    for (int code = 0; code < 16; ++code)
      table[size_t(s * 16 + code)] = bfloat16(e2m1_value(uint8_t(code)) * scale).bits;
  }
  return table;
}

}  // namespace

void fp4_dequantize_rows(const uint8_t* packed, const uint8_t* scales, int64_t rows,
                         int64_t cols, Fp4Kind kind, float tensor_scale, int64_t block_rows,
                         float* out) {
  const int64_t block = fp4_block(kind), nb = (cols + block - 1) / block,
                row_bytes = (cols + 1) / 2;
  // The global decode scale as Transformer Engine keeps it, 1 / S_enc in fp32, applied once to
  // the exact product of the element and its block scale.
  const float global = kind == Fp4Kind::nvfp4 ? 1.0f / tensor_scale : 1.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* codes = scales + r / block_rows * nb;
    for (int64_t c = 0; c < cols; ++c) {
      const float e = e2m1_value(code_at(packed, row_bytes, r, c));
      const float product = e * scale_value(codes[c / block], kind);
      out[r * cols + c] = kind == Fp4Kind::nvfp4 ? product * global : product;
    }
  }
}

namespace {

// One row's block products through the table, as bf16 bits or as floats.
template <typename Out>
void block_values_row(const uint8_t* row, const uint8_t* codes, int64_t cols, int64_t block,
                      const uint16_t* products, Out* o) {
  const int64_t nb = (cols + block - 1) / block;
  auto value = [](uint16_t bits) {
    if constexpr (std::is_same_v<Out, uint16_t>)
      return bits;
    else
      return std::bit_cast<float>(uint32_t(bits) << 16);
  };
  for (int64_t b = 0; b < nb; ++b) {
    const uint16_t* t = products + codes[b] * 16;
    const int64_t c0 = b * block, c1 = std::min(cols, c0 + block);
    // Blocks start on a byte (block sizes are even): two elements a byte.
    int64_t c = c0;
    for (; c + 1 < c1; c += 2) {
      const uint8_t byte = row[c / 2];
      o[c] = value(t[byte & 0xF]);
      o[c + 1] = value(t[byte >> 4]);
    }
    if (c < c1) o[c] = value(t[row[c / 2] & 0xF]);
  }
}

}  // namespace

void fp4_block_values(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols,
                      Fp4Kind kind, int64_t block_rows, bool bf16, void* out) {
  static const std::vector<uint16_t> nvfp4_products = product_table(Fp4Kind::nvfp4);
  static const std::vector<uint16_t> mxfp4_products = product_table(Fp4Kind::mxfp4);
  const uint16_t* products =
      kind == Fp4Kind::nvfp4 ? nvfp4_products.data() : mxfp4_products.data();
  const int64_t block = fp4_block(kind), nb = (cols + block - 1) / block,
                row_bytes = (cols + 1) / 2;
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   const uint8_t* codes = scales + r / block_rows * nb;
                   if (bf16)
                     block_values_row(packed + r * row_bytes, codes, cols, block, products,
                                      static_cast<uint16_t*>(out) + r * cols);
                   else
                     block_values_row(packed + r * row_bytes, codes, cols, block, products,
                                      static_cast<float*>(out) + r * cols);
                 }
               });
}

void fp4_transpose_tiled(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols,
                         int64_t block, uint8_t* packed_t, uint8_t* scales_t) {
  const int64_t row_bytes = (cols + 1) / 2, row_bytes_t = (rows + 1) / 2;
  std::memset(packed_t, 0, size_t(cols * row_bytes_t));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      packed_t[c * row_bytes_t + r / 2] |=
          uint8_t(code_at(packed, row_bytes, r, c) << (r % 2 == 0 ? 0 : 4));
  const int64_t tile_rows = (rows + block - 1) / block, tile_cols = (cols + block - 1) / block;
  for (int64_t i = 0; i < tile_rows; ++i)
    for (int64_t j = 0; j < tile_cols; ++j) scales_t[j * tile_rows + i] = scales[i * tile_cols + j];
}

}  // namespace mixp::kernels
