#pragma once
// The control side's questions about a per-key rule's live keys: the top N by a counter, and one key
// found from the text an operator types (the text key_text prints, or an address inside the key's
// prefix). Readers only: they walk the workers' tables with Engine::for_each_key, never blocking
// metering.
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "dataplane/engine/engine.hpp"
#include "dataplane/engine/keys.hpp"

namespace tricolor::dataplane {

// What keys are ranked by, largest first (ties broken by the key's bytes: a deterministic order).
enum class KeyOrder : std::uint8_t {
  red_bytes, red_packets, yellow_bytes, yellow_packets, green_bytes, green_packets, bytes, packets
};
inline constexpr KeyOrder kKeyOrders[] = {KeyOrder::red_bytes,   KeyOrder::red_packets,   KeyOrder::yellow_bytes,
                                          KeyOrder::yellow_packets, KeyOrder::green_bytes, KeyOrder::green_packets,
                                          KeyOrder::bytes,       KeyOrder::packets};
std::string_view to_string(KeyOrder order) noexcept;  // "red-bytes", ...
std::optional<KeyOrder> key_order_named(std::string_view name) noexcept;

struct RankedKey {
  MeterKey key;
  policer::State state;  // as of the key's latest packet
  KeyCounters counters;
  unsigned worker = 0;   // the worker that meters it
};

// The `top` keys of a per-key rule by `order` (every key when top is empty), best first. Keeps at most
// `top` keys while it walks: a million live keys cost no more memory than the answer.
std::vector<RankedKey> rank_keys(const Engine& engine, std::size_t rule, KeyOrder order,
                                 std::optional<std::size_t> top);

// The key of a per-key rule that `text` names, in key_text's forms ("10.1.2.0/24" or any address in
// it, "10.0.0.1:443", "[2001:db8::1]:443", "udp 10.0.0.1:1000>10.0.0.2:53"); empty if it is not one.
std::optional<MeterKey> parse_key_text(const PerKey& per, std::string_view text);

// That key if it is live, with the worker that meters it.
std::optional<RankedKey> find_key(const Engine& engine, std::size_t rule, const MeterKey& key);

}  // namespace tricolor::dataplane
