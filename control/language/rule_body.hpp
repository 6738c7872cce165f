#pragma once
// The body of `rule add|change` (its matches, meters, input color and actions) and the ACTION of
// `default`. Internal to control/.
#include <string_view>

#include "control/language/cursor.hpp"
#include "control/language/store.hpp"
#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"

namespace tricolor::control::detail {

// ACTION: forward | drop | remark DSCP [pcp N] | pcp N [remark DSCP]
Expected<dataplane::Action> parse_action(Cursor& c);

// RULE-BODY: clauses in any order, each at most once, up to the end of the line. The profiles and
// color maps it names must exist in `store`.
Expected<dataplane::Rule> parse_rule_body(Cursor& c, const Store& store, std::string_view name);

}  // namespace tricolor::control::detail
