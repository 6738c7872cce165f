// splitmix64 (Steele, Lea and Flood, 2014): the deterministic generator behind the demo's traffic, the
// benchmarks' workloads and the tests' random cases. The same seed gives the same sequence everywhere,
// which keeps generated captures, golden outputs and failing test cases reproducible.
#pragma once

#include <cstdint>

namespace tricolor {

// The output function alone: a bijection on 64-bit words (distinct inputs, distinct outputs).
constexpr std::uint64_t splitmix64_mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  return splitmix64_mix(state += 0x9e3779b97f4a7c15ULL);
}

struct SplitMix64 {
  std::uint64_t state;
  constexpr std::uint64_t next() noexcept { return splitmix64(state); }
  // Modulo bias is negligible for the small bounds used here; 0 for an empty range.
  constexpr std::uint64_t below(std::uint64_t n) noexcept { return n == 0 ? 0 : next() % n; }
  constexpr std::uint64_t between(std::uint64_t lo, std::uint64_t hi) noexcept { return lo + below(hi - lo + 1); }
  constexpr bool chance(unsigned percent) noexcept { return below(100) < percent; }
};

}  // namespace tricolor
