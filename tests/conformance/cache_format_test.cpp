// The grouped latent caches of docs/contract.md §13 (fp8_ds_mla, DeepSeek-V3.2's
// 656-byte records, and mxfp8_ds_mla, DeepSeek-V4.1's 528-byte ones): the
// backend's gather_latents against a decoder written here in fp64 from the
// formats' definitions, bit for bit, into float32 latents and into the
// backend's own latent dtype; and every malformed cache refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "conformance/conformance_fixture.hpp"
#include "error_message.hpp"
#include "mla/backend/latents.hpp"

namespace mla::testing {
namespace {

// e4m3 from its definition: sign, 4 exponent bits (bias 7), 3 mantissa bits,
// subnormals at exponent 0; S.1111.111 is NaN (never drawn).
double e4m3_value(std::uint8_t code) {
  const int exponent = (code >> 3) & 15, mantissa = code & 7;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return (code & 0x80) ? -magnitude : magnitude;
}

struct Format {
  CacheFormat format;
  int latent;  // L
  int bytes;   // per token
};

class CacheFormats : public Conformance {
 protected:
  static constexpr int rope = 64;  // R of every shape below and of both formats

  // A random record: e4m3 codes (never NaN), and the format's scales and
  // rope values. Its values in fp64 go to `values` (L + R of them).
  void draw_record(const Format& f, std::uint8_t* record, double* values) {
    std::uniform_int_distribution<int> code(0, 0x7e);
    std::bernoulli_distribution negative(0.5);
    for (int i = 0; i < 512; ++i) record[i] = static_cast<std::uint8_t>(code(rng_) | (negative(rng_) ? 0x80 : 0));
    if (f.format == CacheFormat::fp8_ds_mla) {
      std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
      std::uniform_int_distribution<int> exponent(-12, 3);
      double scales[4];
      for (int g = 0; g < 4; ++g) {
        const float scale = std::ldexp(mantissa(rng_), exponent(rng_));
        scales[g] = scale;
        std::memcpy(record + 512 + 4 * g, &scale, 4);  // little-endian float32, as the format stores it
      }
      for (int i = 0; i < 512; ++i) values[i] = e4m3_value(record[i]) * scales[i / 128];
      std::uniform_real_distribution<float> any(-3.0f, 3.0f);
      for (int j = 0; j < rope; ++j) {
        const float x = any(rng_);
        std::uint32_t bits = 0;
        std::memcpy(&bits, &x, 4);
        const auto bf16 = static_cast<std::uint16_t>(bits >> 16);  // any bfloat16 value
        record[528 + 2 * j] = static_cast<std::uint8_t>(bf16 & 0xff);
        record[529 + 2 * j] = static_cast<std::uint8_t>(bf16 >> 8);
        const std::uint32_t widened = std::uint32_t{bf16} << 16;
        float value = 0.0f;
        std::memcpy(&value, &widened, 4);
        values[512 + j] = value;
      }
    } else {
      std::uniform_int_distribution<int> exponent(117, 133);
      for (int g = 0; g < 16; ++g) record[512 + g] = static_cast<std::uint8_t>(exponent(rng_));
      for (int i = 0; i < 512; ++i) values[i] = e4m3_value(record[i]) * std::ldexp(1.0, record[512 + i / 32] - 127);
    }
  }

  // `x` rounded to `dtype` as the contract says: the float32 product first.
  static float rounded(double x, DType dtype) {
    HostTensor one(dtype, {1});
    one.set(static_cast<float>(x), 0);
    return one.at(0);
  }
};

TEST_P(CacheFormats, GatherDecodesBitForBit) {
  ASSERT_EQ(GetParam().dims.qk_rope_head_dim, rope);
  const int H = heads(), width = qk_dim();
  for (const Format f : {Format{CacheFormat::fp8_ds_mla, 512, 656}, Format{CacheFormat::mxfp8_ds_mla, 448, 528}}) {
    SCOPED_TRACE(std::string(cache_format_name(f.format)));
    ASSERT_EQ(cache_record_bytes(f.format), f.bytes);
    constexpr int blocks = 5, block_size = 7, tokens = 23;
    HostTensor cache(DType::float8_e4m3, {blocks, block_size, f.bytes});
    std::vector<double> values(static_cast<std::size_t>(blocks * block_size * (f.latent + rope)));
    auto* bytes = static_cast<std::uint8_t*>(cache.storage());
    for (int slot = 0; slot < blocks * block_size; ++slot)
      draw_record(f, bytes + slot * f.bytes, values.data() + slot * (f.latent + rope));
    std::vector<std::int64_t> slots;
    std::uniform_int_distribution<std::int64_t> any_slot(0, blocks * block_size - 1);
    for (int t = 0; t < tokens; ++t) slots.push_back(any_slot(rng_));
    const DeviceTensor d_cache = upload(queue_, cache);
    UsmBuffer d_slots = UsmBuffer::device(queue_, slots.size() * sizeof(std::int64_t));
    queue_.memcpy(d_slots.get(), slots.data(), slots.size() * sizeof(std::int64_t));
    LatentGather gather;
    gather.cache = d_cache.view;
    gather.slots = d_slots.as<const std::int64_t>();
    gather.tokens = tokens;
    gather.format = f.format;
    std::vector<DType> latent_dtypes{DType::float32};
    if (backend_->latent_dtype(dtype()) != DType::float32) latent_dtypes.push_back(backend_->latent_dtype(dtype()));
    for (DType latent_dtype : latent_dtypes) {
      HostTensor x(latent_dtype, {tokens, f.latent}), k(dtype(), {tokens, H, width});
      const DeviceTensor dx = upload(queue_, x), dk = upload(queue_, k);
      backend_->gather_latents(queue_, gather, dx.view, dk.view);
      download(queue_, dx, x);
      download(queue_, dk, k);
      int wrong = 0;
      for (int t = 0; t < tokens && wrong < 5; ++t) {
        const double* row = values.data() + slots[static_cast<std::size_t>(t)] * (f.latent + rope);
        for (int l = 0; l < f.latent; ++l) {
          const float expected = rounded(rounded(row[l], DType::float32), latent_dtype);
          if (x.at(t, l) != expected && ++wrong <= 5)
            ADD_FAILURE() << dtype_name(latent_dtype) << " latent " << l << " of token " << t << ": " << x.at(t, l)
                          << ", the decoder says " << expected;
        }
        for (int h = 0; h < H; ++h) {
          for (int j = 0; j < rope; ++j) {
            const float expected = rounded(rounded(row[f.latent + j], DType::float32), dtype());
            if (k.at(t, h, width - rope + j) != expected && ++wrong <= 5)
              ADD_FAILURE() << "rope " << j << " of token " << t << ", head " << h << ": "
                            << k.at(t, h, width - rope + j) << ", the decoder says " << expected;
          }
        }
      }
    }
  }
}

TEST_P(CacheFormats, MalformedCachesAreRefusedAndNothingIsWritten) {
  const int H = heads(), width = qk_dim();
  constexpr int tokens = 3;
  const std::vector<std::int64_t> slots{0, 1, 2};
  UsmBuffer d_slots = UsmBuffer::device(queue_, slots.size() * sizeof(std::int64_t));
  queue_.memcpy(d_slots.get(), slots.data(), slots.size() * sizeof(std::int64_t));
  const auto refused = [&](CacheFormat format, const HostTensor& cache, int latent, float scale,
                           const std::string& expected) {
    const DeviceTensor d_cache = upload(queue_, cache);
    const HostTensor x(DType::float32, {tokens, latent}), k(dtype(), {tokens, H, width});
    const DeviceTensor dx = upload(queue_, x), dk = upload(queue_, k);
    LatentGather gather;
    gather.cache = d_cache.view;
    gather.slots = d_slots.as<const std::int64_t>();
    gather.tokens = tokens;
    gather.format = format;
    gather.scale = scale;
    const std::string message =
        invalid_argument_message([&] { backend_->gather_latents(queue_, gather, dx.view, dk.view); });
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
    const HostTensor x_after = fetch(dx.view), k_after = fetch(dk.view);
    EXPECT_EQ(std::memcmp(x_after.storage(), x.storage(), x.storage_bytes()), 0) << expected << ": latents written";
    EXPECT_EQ(std::memcmp(k_after.storage(), k.storage(), k.storage_bytes()), 0) << expected << ": k written";
  };
  const HostTensor ds(DType::float8_e4m3, {1, 4, 656}), mx(DType::float8_e4m3, {1, 4, 528});
  refused(CacheFormat::fp8_ds_mla, mx, 512, 1.0f, "[blocks, block_size, 656]");
  refused(CacheFormat::fp8_ds_mla, HostTensor(DType::bfloat16, {1, 4, 656}), 512, 1.0f, "is float8_e4m3 bytes");
  refused(CacheFormat::fp8_ds_mla, HostTensor(DType::float8_e4m3, {1, 4, 656}, {4 * 1312, 1312, 2}), 512, 1.0f,
          "unit last stride");
  refused(CacheFormat::fp8_ds_mla, ds, 448, 1.0f, "fp8_ds_mla holds 512 latents and 64 rope values; got 448 and 64");
  refused(CacheFormat::mxfp8_ds_mla, mx, 512, 1.0f, "mxfp8_ds_mla holds 512 values");
  refused(CacheFormat::mxfp8_ds_mla, mx, 448, 0.5f, "carries its own scales; scale must be 1");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CacheFormats,
                         ::testing::Values(ConformanceShape{DType::bfloat16, deepseek_dims, 2},
                                           ConformanceShape{DType::float16, {64, 64, 128}, 3},
                                           ConformanceShape{DType::float32, deepseek_dims, 1}),
                         shape_name);

}  // namespace
}  // namespace mla::testing
