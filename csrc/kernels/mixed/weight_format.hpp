#pragma once
// The packed weight format of the mixed-input GEMM (out = A @ dequant(W)^T), chosen for the kernel:
// each lane of a warp gets its mma.sync B fragments for several k16 steps with ONE 16-byte load,
// and the nibbles/bytes of each 32-bit word sit where the register dequantization tricks want them.
//
// W is [N, K] (nn.Linear's layout), quantized to integers q in [0, 2^bits). The packed tensor is
// int32 and walks, in this order:  n8 block nb  ->  k block kb  ->  lane (32)  ->  word (4).
//   INT4: k blocks of 128 (8 k16 steps), shape [N/8, Kp/128, 32, 4], Kp = K rounded up to 128
//   INT8: k blocks of 64  (4 k16 steps), shape [N/8, Kp/64,  32, 4], Kp = K rounded up to 64
// so a warp reads 512 contiguous bytes per (nb, kb): fully coalesced, and consecutive k blocks of
// one n8 block are adjacent (a CTA streams K for its n range).
//
// Lane l = 4 * g + t (g = l / 4, t = l % 4, the mma fragment's groupID / threadID_in_group) holds
// column n = 8 * nb + g. The mma.m16n8k16 B fragment of k16 step j is two half2 registers:
//   r0 = (W[n, k0 + 2t], W[n, k0 + 2t + 1]),  r1 = (W[n, k0 + 2t + 8], W[n, k0 + 2t + 9]),
// k0 = (k block start) + 16 j.
//
// INT4, word w (0..3) of lane l covers k16 steps j = 2w and 2w + 1. Its nibbles (bits 4i..4i+3 is
// nibble i) are ordered so that `(word >> 8s) & 0x000F000F` picks the register pair s:
//   nibble:  0        1        2        3        4        5        6        7
//   value:   r0(2w).x r1(2w).x r0(2w+1).x r1(2w+1).x r0(2w).y r1(2w).y r0(2w+1).y r1(2w+1).y
// (x = low half of the register, y = high half). Pairs (0,4), (1,5), (2,6), (3,7) are registers
// r0(2w), r1(2w), r0(2w+1), r1(2w+1): one lop3 with 0x000F000F / 0x00F000F0 and a shift by 8
// yields two registers at a time.
//
// INT8, word w (0..3) of lane l covers k16 step j = w. Bytes 0..3 are r0.x, r1.x, r0.y, r1.y, so
// a byte permute of bytes (0, 2) and (1, 3) next to 0x64 exponent bytes yields r0 and r1.
//
// Dequantization in registers, no int->float conversions: a half with exponent bits 0x6400 and a
// 10-bit mantissa m is 1024 + m, so (q | 0x6400) - (1024 + z) = q - z exactly; the kernel applies
// the scale to the fp32 products afterwards (dequant.cuh). bf16 uses 0x4300 (128 + m, 7-bit mantissa: exact for q < 128; INT8 in bf16 is split into
// two nibbles or handled with 0x4B00 on float). Symmetric weights use z = 2^(bits-1).
//
// Scales (and zero points for asymmetric weights) are [K / G, N] in the activation dtype, G the
// group size (32, 64, 128; per-channel: one row, G = K). Zero points hold the integer zero z of
// each group and column as a float value.

namespace cute_gemm {
namespace mixed {

constexpr int kLanes = 32;
constexpr int kWordsPerLane = 4;
constexpr int kBlockN = 8;

// K per packed block: 8 k16 steps for INT4, 4 for INT8.
constexpr int block_k(int bits) { return bits == 4 ? 128 : 64; }

}  // namespace mixed
}  // namespace cute_gemm
