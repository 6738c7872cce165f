#pragma once
// The README's main command: a small generated capture and an example policy for tricolor-replay.
#include <cstdint>
#include <string>

#include "policer/expected.hpp"

namespace tricolor::dataplane {

// The example policy, in the command language.
const char* demo_policy();

// Writes `seconds` of generated traffic (web, DNS, voice, IPv6 bulk with AF input colors, guests metered
// per source, unmatched traffic, ARP and a few malformed frames) as a pcap; returns the number of
// packets.
Expected<std::uint64_t> write_demo_capture(const std::string& path, std::uint64_t seconds, std::uint64_t seed);
Expected<bool> write_demo_policy(const std::string& path);

}  // namespace tricolor::dataplane
