// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of every checkpoint file.
// Invariant: Crc32c("123456789") == 0xE3069283 (the standard check value); Extend chains pieces.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pentamesh::ckpt {

// CRC of `size` bytes continuing from a previous crc (0 to start).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);
inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

}  // namespace pentamesh::ckpt
