#pragma once
// Parsers of single values of the command language, one token each, with the error that names the
// token and what was expected. Internal to control/ (the ones the tests use directly are in
// language_internal.hpp). Each is linear in its token: lists are read item by item, never split first.
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"

namespace tricolor::control::detail {

// A DSCP 0-63 or its name; nullopt otherwise.
std::optional<std::uint8_t> dscp_value(std::string_view word);

Expected<std::uint8_t> parse_one_dscp(std::string_view token);                      // remark DSCP
Expected<std::uint8_t> parse_pcp(std::string_view token);                           // 0-7
Expected<std::vector<std::uint16_t>> parse_ports(std::string_view token);           // port 0,1
Expected<std::vector<dataplane::PortRange>> parse_l4_ports(std::string_view token);  // dport 80,1024-65535
Expected<std::vector<std::uint8_t>> parse_dscp_list(std::string_view token);        // dscp ef,af11
Expected<std::uint8_t> parse_protocol(std::string_view token);                      // tcp or 0-255
Expected<dataplane::MeteredLength> parse_length(std::string_view token);            // l2+4
Expected<dataplane::PerKey> parse_per_key(std::string_view token);                  // src/24,64
Expected<std::uint64_t> parse_duration(std::string_view token);                     // 10ms, in ns
Expected<std::uint64_t> parse_timeout(std::string_view token);                      // 30s, in ns: 1ms..24h
Expected<std::uint32_t> parse_count(std::string_view token, std::string_view what);  // 8 (no unit)
Expected<std::uint32_t> parse_capacity(std::string_view token);                     // 64k
Expected<std::uint32_t> parse_shape_queue(std::string_view token);                  // 64, 4k: 1..1m packets

// The values of one color of a color map: N, N-M or (DSCP) names, each end at most 63 (DSCP) or 7
// (PCP), separated by commas, as ranges (first, last) as written (a reversed one is the caller's error).
Expected<std::vector<std::pair<std::uint8_t, std::uint8_t>>> parse_color_map_values(std::string_view token,
                                                                                    dataplane::ColorMapKind kind);

}  // namespace tricolor::control::detail
