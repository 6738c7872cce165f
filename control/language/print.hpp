#pragma once
// The printed forms of the policy's parts: each a command that loads back to the same value. Internal
// to control/; print() (language.hpp) puts them together.
#include <cstdint>
#include <string>

#include "dataplane/engine/policy.hpp"

namespace tricolor::control::detail {

std::string format_profile(const dataplane::ProfileDef& profile);  // profile add NAME ...
std::string format_color_map(const dataplane::ColorMap& map);      // color-map add NAME ...
std::string format_rule(const dataplane::Rule& rule);              // rule add NAME ...
std::string format_action(const dataplane::Action& action);        // drop, forward, remark ef pcp 3
std::string format_protocol(std::uint8_t protocol);                // tcp, or the number

}  // namespace tricolor::control::detail
