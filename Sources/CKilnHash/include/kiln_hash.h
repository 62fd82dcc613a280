// Checksums at memory speed: SHA-256 with the x86-64 SHA extensions, and CRC-32 (the zlib polynomial) by carry-less multiplication folding on
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

/// SHA-256's 64 round constants (shared by the hardware path and the portable Swift code).
extern const uint32_t kiln_sha256_k[64];

/// Non-zero when `kiln_sha256_blocks` uses the CPU's SHA instructions.
int kiln_sha256_hardware(void);

/// Runs the SHA-256 compression function over `blocks` 64-byte blocks at `p`, updating `state`
/// (eight words, FIPS 180-4 order). Returns 0, touching nothing, when there is no hardware path.
int kiln_sha256_blocks(uint32_t state[8], const uint8_t *p, size_t blocks);

#endif
