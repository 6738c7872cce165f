#pragma once
// The XDP tests' one-rule policies (xdp_exactness_test.cpp, xdp_cpus_test.cpp): a rule on 10.0.0.0/8.
#include <string>

#include "dataplane/engine/policy.hpp"

namespace tricolor::dataplane::xdp::test_policy {

// Green forwarded, yellow remarked AF12, red dropped; the default action remarks CS1.
inline Rule metered_rule(const std::string& name, const std::string& profile, InputColor input) {
  Rule r;
  r.name = name;
  r.profile = profile;
  Prefix dst;
  dst.address = {10, 0, 0, 0};
  dst.length = 8;
  r.match.dst = dst;
  r.input = input;
  r.on_color[1].dscp = 12;
  return r;
}

inline Policy one_rule_policy(const policer::Params& p, InputColor input, PerKey per_key = {}) {
  Policy policy;
  policy.profiles.push_back({"meter", p});
  Rule r = metered_rule("metered", "meter", input);
  r.per_key = per_key;
  policy.rules.push_back(r);
  policy.default_action.dscp = 8;
  return policy;
}

}  // namespace tricolor::dataplane::xdp::test_policy
