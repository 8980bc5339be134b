// CRC-32 (crc32.hpp): a byte at a time through a 256-entry table.
#include "accelkit/crc32.hpp"

#include <array>

namespace accelkit {

std::uint32_t crc32(std::string_view bytes, std::uint32_t crc) noexcept {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

}  // namespace accelkit
