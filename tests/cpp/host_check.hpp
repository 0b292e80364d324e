#pragma once
// What the host tests under tests/cpp share: a CHECK that counts failures (printing the first
// 20), and the postconditions layouts are checked against: how often a layout hits each offset,
// bijections onto [0, n), and shared-memory bank conflicts of one warp's accesses.

#include <cstdio>
#include <map>
#include <vector>

static int failures = 0;
#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      if (failures++ < 20) {                             \
        std::printf("FAIL %s:%d: ", __FILE__, __LINE__); \
        std::printf(__VA_ARGS__);                        \
        std::printf("\n");                               \
      }                                                  \
    }                                                    \
  } while (0)

// How often each offset of the layout's image is hit, over its whole domain.
template <class L>
std::map<long, int> coverage(L const& l) {
  std::map<long, int> hits;
  for (int i = 0; i < int(size(l)); ++i) hits[long(l(i))]++;
  return hits;
}

// Every offset in [0, n) hit exactly `times` times, nothing else.
inline bool covers(std::map<long, int> const& hits, long n, int times = 1) {
  if (long(hits.size()) != n) return false;
  for (auto const& kv : hits)
    if (kv.first < 0 || kv.first >= n || kv.second != times) return false;
  return true;
}

// Every element of [0, n) hit exactly once by `offsets`.
inline bool bijective(std::vector<long> const& offsets, long n) {
  if (long(offsets.size()) != n) return false;
  std::vector<int> hits(n, 0);
  for (long o : offsets) {
    if (o < 0 || o >= n || hits[o]++) return false;
  }
  return true;
}

// 16-byte accesses, served 8 lanes (128 bytes) at a time: each phase must touch 8 different
// 16-byte bank quads (all 32 banks), or the same 16 bytes.
inline bool conflict_free_16B(std::vector<long> const& byte_addr) {
  for (size_t p = 0; p + 8 <= byte_addr.size(); p += 8) {
    std::map<long, long> quad_to_unit;
    for (size_t t = p; t < p + 8; ++t) {
      const long q = (byte_addr[t] / 16) % 8;
      auto it = quad_to_unit.find(q);
      if (it != quad_to_unit.end() && it->second != byte_addr[t] / 16) return false;
      quad_to_unit[q] = byte_addr[t] / 16;
    }
  }
  return true;
}

// Narrow (<= 4-byte) accesses by 32 lanes at once: lanes in one bank must hit the same word.
inline bool conflict_free_words(std::vector<long> const& byte_addr) {
  std::map<long, long> bank_to_word;
  for (long a : byte_addr) {
    const long bank = (a / 4) % 32;
    auto it = bank_to_word.find(bank);
    if (it != bank_to_word.end() && it->second != a / 4) return false;
    bank_to_word[bank] = a / 4;
  }
  return true;
}
