// CRC-32 (zlib's polynomial, as gzip and PNG use it) of byte ranges, and its
// text form: the checksum io/checkpoint.h and the partitioned checkpoints of
// parallel/checkpoint/ store.
//
// Contract: crc32(p, n) equals zlib's crc32(0, p, n) for any n (lengths past
// 4 GiB are fed in chunks); crc32(p2, n2, crc32(p1, n1)) is the CRC of the
// concatenation, so a file can be checksummed piece by piece. crc32_hex(v) is
// 8 lowercase hex digits ("00000000" for 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::io {

uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t crc32(const std::string& bytes, uint32_t crc = 0) { return crc32(bytes.data(), bytes.size(), crc); }
std::string crc32_hex(uint32_t v);

}  // namespace weft::io
