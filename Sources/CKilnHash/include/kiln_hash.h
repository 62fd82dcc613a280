// Checksums at memory speed: CRC-32 (the zlib polynomial) by carry-less multiplication folding on
// x86-64 (PCLMULQDQ) and by the CRC32 instructions on arm64, where the CPU has them.
#ifndef KILN_HASH_H
#define KILN_HASH_H
#include <stddef.h>
#include <stdint.h>

/// Non-zero when `kiln_crc32_bulk` uses a hardware path on this CPU.
int kiln_crc32_hardware(void);

/// Advances a zlib-compatible CRC-32 (`crc` as zlib's `crc32()` returns it) over a prefix of `p`
/// and returns how many bytes it consumed (0 without a hardware path; otherwise a multiple of 16,
/// leaving fewer than 64 bytes for the caller's table-driven code).
size_t kiln_crc32_bulk(uint32_t *crc, const uint8_t *p, size_t n);

#endif
