// CRC-32 (IEEE 802.3, the polynomial zlib and zip use): checkpoints carry one over their payload,
// and a zip archive's records (TorchScript files, .pt2 packages) one each.
#pragma once

#include <cstdint>
#include <string_view>

namespace accelkit {

// The CRC-32 of `bytes`, continuing from `crc` (0 to begin): crc32("123456789") == 0xCBF43926.
std::uint32_t crc32(std::string_view bytes, std::uint32_t crc = 0) noexcept;

}  // namespace accelkit
