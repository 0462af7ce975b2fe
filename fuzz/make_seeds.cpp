// Writes the seed corpora of the fuzzers: valid files of every kind they read, each checked by
// the parser it seeds. make_seeds DIR writes DIR/safetensors/* and DIR/idx/* (the IDX seeds
// carry fuzz_idx's leading mode byte).
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/idx_parse.h"
#include "io/safetensors_layout.h"
#include "mixp/error.h"
#include "mixp/io/safetensors.h"

namespace {

using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

struct Tensor {
  std::string name;
  mixp::DType dtype;
  std::vector<int64_t> shape;
};

// A safetensors file as the format describes it: tensors packed in order, data of a pattern.
Bytes safetensors(const std::vector<Tensor>& tensors, bool metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (metadata) header["__metadata__"] = {{"format", "pt"}, {"model", "seed"}};
  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    uint64_t n = uint64_t(mixp::size_of(t.dtype));
    for (const int64_t d : t.shape) n *= uint64_t(d);
    header[t.name] = {{"dtype", mixp::io::safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(uint64_t(text.size()) >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  for (uint64_t i = 0; i < offset; ++i) out.push_back(uint8_t(i * 37 + 11));
  return out;
}

Bytes idx(uint32_t magic, const std::vector<uint32_t>& dims) {
  Bytes out;
  auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
  };
  put(magic);
  uint64_t n = 1;
  for (const uint32_t d : dims) {
    put(d);
    n *= d;
  }
  for (uint64_t i = 0; i < n; ++i) out.push_back(uint8_t(i % 10));
  return out;
}

Bytes gzip(const Bytes& plain) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  Bytes out(deflateBound(&z, uLong(plain.size())) + 32);
  z.next_in = const_cast<Bytef*>(plain.data());
  z.avail_in = uInt(plain.size());
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  const int code = deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  if (code != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

void write(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir / "safetensors");
  fs::create_directories(dir / "idx");
  try {
    using mixp::DType;
    std::vector<Tensor> every;
    for (int d = 0; d < mixp::kDTypeCount; ++d)
      every.push_back({std::string("layer.") + mixp::name_of(DType(d)), DType(d), {2, 3}});
    const std::vector<std::pair<std::string, Bytes>> st = {
        {"every_dtype", safetensors(every, true)},
        {"one_f32", safetensors({{"w", DType::f32, {4}}}, false)},
        {"scalar_and_empty",
         safetensors({{"a", DType::bf16, {}}, {"b", DType::f16, {0, 5}}, {"c", DType::u8, {3}}},
                     true)},
        {"model_like", safetensors({{"fc1.weight", DType::f32, {8, 16}},
                                    {"fc1.bias", DType::f32, {8}},
                                    {"bn.num_batches_tracked", DType::i64, {}}},
                                   true)},
        {"empty", safetensors({}, false)},
    };
    for (const auto& [name, bytes] : st) {
      mixp::io::detail::parse_safetensors_layout(bytes, name);  // a seed must be valid
      write(dir / "safetensors" / (name + ".safetensors"), bytes);
    }
    const std::vector<std::tuple<std::string, Bytes, int>> ix = {
        {"labels", idx(0x801, {10}), 1},
        {"images", idx(0x803, {3, 4, 5}), 3},
        {"four_dims", idx(0x804, {2, 1, 3, 2}), 0},
    };
    for (const auto& [name, plain, ndim] : ix) {
      const uint8_t mode = uint8_t(ndim == 1 ? 2 : ndim == 3 ? 4 : 0);
      mixp::data::detail::parse_idx(plain, name, ndim);
      Bytes seed{mode};
      seed.insert(seed.end(), plain.begin(), plain.end());
      write(dir / "idx" / name, seed);
      const Bytes gz = gzip(plain);
      mixp::data::detail::parse_idx(mixp::data::detail::gunzip(gz, name), name, ndim, true);
      seed = {uint8_t(mode | 1)};
      seed.insert(seed.end(), gz.begin(), gz.end());
      write(dir / "idx" / (name + ".gz"), seed);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
