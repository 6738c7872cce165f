#pragma once
// A keyed hash whose collisions cannot be computed offline, for the tables a packet's fields index:
// the per-key meter tables (key_table.hpp), the workers' placement of keys (placement.hpp) and the
// flow cache (flow_cache.hpp). Its secret comes from the kernel's CSPRNG when the table is made.
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>

namespace tricolor::dataplane {

// Secret words from the kernel's CSPRNG; std::random_device if getrandom(2) is unavailable.
inline void secret_words(std::uint64_t* out, std::size_t n) {
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  const std::size_t want = n * sizeof(std::uint64_t);
  std::size_t got = 0;
  while (got < want) {
    const ssize_t r = getrandom(bytes + got, want - got, 0);
    if (r > 0) got += static_cast<std::size_t>(r);
    else if (r < 0 && errno == EINTR) continue;
    else break;
  }
  if (got == want) return;
  std::random_device device;
  for (std::size_t i = 0; i < n; ++i)
    out[i] = (std::uint64_t{device()} << 32) | device();
}

// NH, the universal hash of UMAC and VHASH: the sum over word pairs of (x_i + k_i) * (x_i+1 + k_i+1)
// as 128-bit products, with k a secret of this hash (getrandom). For two distinct keys the 128-bit
// sums collide with probability at most 2^-64 over the secret, so keys cannot be chosen offline to
// collide. The sum is folded (hi ^ lo) and mixed by a 64 x 64 -> 128 multiplication with a secret
// odd constant (hi ^ lo again), so that every output bit depends on every key bit: a key table takes
// the slot from the low bits and the tag from the high 32, the workers' placement its owner
// (placement.hpp). One multiplication per 16 bytes plus one: ~1.5 ns for an IPv4 key, ~2 ns for IPv6.
// A key whose words past the first pair are all zero (an IPv4 meter key, keys.hpp) gets the same hash
// from one multiplication: the zero pairs' share of the sum, (0 + k_i) * (0 + k_i+1), is the same for
// every such key and is added from a constant worked out with the secret.
// Why not CRC32 with a seed (DPDK's rte_hash_crc): CRC is affine over GF(2), crc(s, x) ^ crc(s, y)
// = crc(0, x ^ y) for equal lengths, so whether two keys collide does not depend on the seed at all;
// anyone can compute a colliding flood offline.
template <std::size_t KeySize>
class SecretHash {
  __extension__ typedef unsigned __int128 U128;

 public:
  using Key = std::array<std::uint8_t, KeySize>;

  SecretHash() {
    std::uint64_t words[kSecretWords + 1];
    secret_words(words, kSecretWords + 1);
    std::copy_n(words, kSecretWords, secret_.begin());
    multiplier_ = words[kSecretWords] | 1;  // odd: the product's low half is a bijection of the fold
    for (std::size_t i = 2; i < kKeyWords; i += 2) zero_tail_ += static_cast<U128>(secret_[i]) * secret_[i + 1];
  }

  std::uint64_t operator()(const Key& key) const noexcept {
    std::uint64_t words[kKeyWords];
    for (std::size_t i = 0; i < kKeyWords; ++i) words[i] = load_word(key, i);
    if constexpr (kKeyWords > 2) {
      std::uint64_t tail = 0;
      for (std::size_t i = 2; i < kKeyWords; ++i) tail |= words[i];
      if (tail == 0) return of_pair(words[0], words[1]);
    }
    return of_words(words);
  }
  // The same of a key whose words past the first two are zero, given those two (native order): for a
  // caller that has just built such a key and holds its words.
  [[gnu::always_inline]] std::uint64_t of_pair(std::uint64_t first, std::uint64_t second) const noexcept {
#if defined(__x86_64__)
    // The 128-bit sum as its two halves, in the registers `mul` leaves them in: GCC 12 stored an
    // __int128 that a loop short of registers holds and loaded it back, twice a hash (the plain pass:
    // 4 instructions a packet and two store-to-load waits before the index line's prefetch, issue 23).
    std::uint64_t low = first + secret_[0], high;
    asm("mulq %[b]\n\taddq %[tail_low], %[low]\n\tadcq %[tail_high], %[high]"
        : [low] "+a"(low), [high] "=&d"(high)
        : [b] "rm"(second + secret_[1]), [tail_low] "rm"(static_cast<std::uint64_t>(zero_tail_)),
          [tail_high] "rm"(static_cast<std::uint64_t>(zero_tail_ >> 64))
        : "cc");
    return mix(high, low);
#else
    return mix(static_cast<U128>(first + secret_[0]) * (second + secret_[1]) + zero_tail_);
#endif
  }
  // The same of a key held as words (native order): for a caller that builds its key word by word
  // (a key built by narrower stores and read back as words stalls on store forwarding).
  std::uint64_t of_words(const std::uint64_t (&words)[KeySize / 8]) const noexcept {
    U128 sum = 0;
    for (std::size_t i = 0; i < kKeyWords; i += 2) {
      const std::uint64_t a = words[i] + secret_[i];
      const std::uint64_t b = (i + 1 < kKeyWords ? words[i + 1] : 0) + secret_[i + 1];  // zero pad
      sum += static_cast<U128>(a) * b;
    }
    return mix(sum);
  }

 private:
  // Portable; of_words' (a key with a tail), and so the reference that tests hold of_pair's to.
  [[gnu::always_inline]] std::uint64_t mix(U128 sum) const noexcept {
    const std::uint64_t fold = static_cast<std::uint64_t>(sum >> 64) ^ static_cast<std::uint64_t>(sum);
    const U128 mixed = static_cast<U128>(fold) * multiplier_;
    return static_cast<std::uint64_t>(mixed >> 64) ^ static_cast<std::uint64_t>(mixed);
  }
#if defined(__x86_64__)
  // The same of the sum's halves, for of_pair's: its product's halves in registers too.
  [[gnu::always_inline]] std::uint64_t mix(std::uint64_t high, std::uint64_t low) const noexcept {
    std::uint64_t mixed_low = high ^ low, mixed_high;
    asm("mulq %[m]" : [low] "+a"(mixed_low), [high] "=d"(mixed_high) : [m] "rm"(multiplier_) : "cc");
    return mixed_high ^ mixed_low;
  }
#endif

  static constexpr std::size_t kKeyWords = KeySize / 8;
  static constexpr std::size_t kSecretWords = (kKeyWords + 1) & ~std::size_t{1};  // whole pairs
  static std::uint64_t load_word(const Key& key, std::size_t i) noexcept {
    std::uint64_t w;
    std::memcpy(&w, key.data() + 8 * i, sizeof w);
    return w;
  }
  std::uint64_t multiplier_;
  std::array<std::uint64_t, kSecretWords> secret_;
  U128 zero_tail_ = 0;  // the sum's share from pairs of zero words past the first pair
};

}  // namespace tricolor::dataplane
