#pragma once
// Operator units for rates and bursts, parsed exactly (no floating point).
//   rates:  bit kbit mbit gbit tbit (SI, k = 1000; must come to whole bytes/s), pps kpps mpps gpps
//   bursts: b (or no suffix) k m g (k = 1024, as tc), optionally followed by "b"; pkt for packets
// Decimals are accepted when they come to a whole number: "1.5k" = 1536 bytes, "2.5kpps" = 2500.
// An error quotes the text with quote() (policer/quote.hpp); its subject is the text as given.
#include <cstdint>
#include <string_view>

#include "policer/expected.hpp"
#include "policer/profile.hpp"

namespace tricolor::policer {

struct Quantity {
  std::uint64_t value;  // bytes/s or packets/s for a rate; bytes or packets for a burst
  Unit unit;
  friend bool operator==(const Quantity&, const Quantity&) = default;
};

Expected<Quantity> parse_rate(std::string_view text);
Expected<Quantity> parse_burst(std::string_view text);

}  // namespace tricolor::policer
