#include "examples/trainer/crc32c.h"

#include <array>

namespace ddpx::trainer {
namespace {

// Reflected polynomial 0x1EDC6F41.
constexpr uint32_t kPolynomial = 0x82F63B78u;

// Slicing-by-4 tables: table[k][b] is the CRC of byte b followed by k zero
// bytes, so four input bytes are folded per lookup round.
struct Tables {
  std::array<std::array<uint32_t, 256>, 4> t{};
  Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kPolynomial : 0);
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (int k = 1; k < 4; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
};

const Tables& tables() {
  static const Tables* const t = new Tables;
  return *t;
}

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  const auto& t = tables().t;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; size >= 4; size -= 4, p += 4) {
    c ^= uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
    c = t[3][c & 0xFF] ^ t[2][(c >> 8) & 0xFF] ^ t[1][(c >> 16) & 0xFF] ^ t[0][c >> 24];
  }
  for (; size > 0; --size, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFF];
  return ~c;
}

}  // namespace ddpx::trainer
