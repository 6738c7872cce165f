// Random policies built through execute(): every failed command leaves the policy as it was, and
// every policy reached prints back to itself (load(print(p)) == p).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "control/language/language.hpp"
#include "control/language/language_internal.hpp"
#include "policer/quote.hpp"

namespace tricolor::control {
namespace {

using dataplane::Policy;

// Commands drawn from the grammar, mostly valid, sometimes not (a wrong unit, a missing profile, a
// reversed range, a map of the wrong kind...), over small pools of names so that adds, changes and
// deletes meet: profiles, color maps, rules with per-key meters, parents and input maps.
class CommandGenerator {
 public:
  explicit CommandGenerator(std::uint64_t seed) : rng_(seed) {}

  std::string command(const Policy& policy) {
    policy_ = &policy;
    if (policy.profiles.empty() && chance(80)) return cat("profile add ", profile_name(), " ", profile_body());
    if (policy.color_maps.empty() && chance(30)) return cat("color-map add ", map_name(), " ", color_map_body());
    switch (below(24)) {
      case 20:
      case 21:
        return cat("color-map add ", map_name(), " ", color_map_body());
      case 22:
        return cat("color-map change ", existing_map(), " ", color_map_body());
      case 23:
        return cat("color-map delete ", existing_map());
      case 0:
      case 1:
      case 2:
        return cat("profile add ", profile_name(), " ", profile_body());
      case 3:
        return cat("profile change ", existing_profile(), " ", profile_body());
      case 4:
        return cat("profile delete ", existing_profile());
      case 5:
        return cat("rule delete ", existing_rule());
      case 6:
        return cat("default ", action());
      case 7:
      case 8:
      case 9:
        return cat("rule change ", existing_rule(), position(), rule_body());
      default:
        return cat("rule add ", rule_name(), position(), rule_body());
    }
  }

 private:
  template <class... Parts>
  static std::string cat(const Parts&... parts) {
    std::string s;
    (s.append(parts), ...);
    return s;
  }
  std::uint64_t below(std::uint64_t n) { return rng_() % n; }
  bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }
  std::string number(std::uint64_t n) { return std::to_string(below(n)); }
  template <class T>
  const T& pick(const std::vector<T>& values) {
    return values[below(values.size())];
  }

  std::string profile_name() { return "p" + number(6); }
  // Mostly a name the policy has.
  std::string existing_profile() {
    if (policy_->profiles.empty() || chance(10)) return profile_name();
    return policy_->profiles[below(policy_->profiles.size())].name;
  }
  std::string existing_rule() {
    if (policy_->rules.empty() || chance(10)) return rule_name();
    return policy_->rules[below(policy_->rules.size())].name;
  }
  // Map names: their own namespace, so sometimes a profile's name.
  std::string map_name() { return chance(10) ? profile_name() : "m" + number(5); }
  std::string existing_map() {
    if (policy_->color_maps.empty() || chance(10)) return map_name();
    return policy_->color_maps[below(policy_->color_maps.size())].name;
  }
  // Mostly a map of the kind asked for.
  std::string existing_map(dataplane::ColorMapKind kind) {
    std::vector<std::string> names;
    for (const auto& map : policy_->color_maps)
      if (map.kind == kind || chance(3)) names.push_back(map.name);
    if (names.empty() || chance(5)) return map_name();
    return pick(names);
  }
  std::string rule_name() {
    return pick(std::vector<std::string>{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11",
                                         "web", "Dns.2", "x-y_z", "R"});
  }

  std::string rate(bool packets) {
    if (packets)
      return number(3) == "0" ? number(1'000'000'001) + "pps"
                              : number(1000) + pick(std::vector<std::string>{"pps", "kpps", "mpps"});
    switch (below(5)) {
      case 0:
        return std::to_string(8 * below(10'000'000)) + "bit";
      case 1:
        return number(100'000) + "kbit";
      case 2:
        return number(1000) + "mbit";
      case 3:
        return number(500) + "gbit";
      default:
        return number(100) + "." + number(10) + "mbit";
    }
  }
  std::string burst(bool packets) {
    if (packets) return number(100'000) + "pkt";
    switch (below(4)) {
      case 0:
        return number(1'000'000);
      case 1:
        return number(10'000) + "k";
      case 2:
        return number(100) + "m";
      default:
        return number(10) + pick(std::vector<std::string>{".5k", ".25m", ".125k"});
    }
  }

  std::string profile_body() {
    // The RFC meters (rates end in 'r') and the limiters (issue 13), each with its parameters.
    static const std::vector<std::vector<std::string>> kParams{
        {"cir", "cbs"},     {"cir", "cbs", "ebs"},       {"cir", "cbs", "pir", "pbs"}, {"cir", "cbs", "eir", "ebs"},
        {"limit", "window"}, {"limit", "window", "buckets"}, {"rate", "tolerance"},    {"rate", "max-burst"},
        {"rate", "period", "cold-factor"}};
    static const std::vector<std::string> kAlgorithms{"1r2c",         "srtcm",          "trtcm",
                                                      "trtcm4115",    "fixed-window",   "sliding-window",
                                                      "gcra",         "smooth",         "warmup"};
    const std::size_t algorithm = below(kAlgorithms.size());
    const bool packets = chance(40);
    std::string text = kAlgorithms[algorithm];
    std::vector<std::string> params = kParams[algorithm];
    std::shuffle(params.begin(), params.end(), rng_);
    for (const auto& param : params) {
      if (chance(5)) continue;  // missing: 0 (or warmup's default cold-factor)
      const bool unit = chance(97) ? packets : !packets;
      text += cat(" ", param, " ", value_of(param, unit));
    }
    if (chance(3)) text += " pbs 1k";  // often not a parameter of the algorithm
    if (chance(2)) text += " window 1s";
    return text;
  }

  std::string value_of(const std::string& param, bool packets) {
    if (param == "window" || param == "tolerance" || param == "period") return limiter_duration();
    if (param == "buckets") return number(70);      // 1 to 64 valid
    if (param == "cold-factor") return number(110);  // 2 to 100 valid
    if (param == "rate" || param.back() == 'r') return limiter_rate(param, packets);
    return burst(packets);
  }

  // The limiters' rates are lower, so that a tolerance or period times the rate often fits a burst.
  std::string limiter_rate(const std::string& param, bool packets) {
    if (param != "rate" || chance(30)) return rate(packets);
    return packets ? number(10'000) + "pps" : number(100'000) + "kbit";
  }

  std::string limiter_duration() {
    if (chance(30)) return duration();  // the timeouts': up to a day, fractions
    switch (below(6)) {
      case 0:
        return number(1000) + "ms";
      case 1:
        return number(100) + "s";
      case 2:
        return number(10) + pick(std::vector<std::string>{"m", "h", ".5s", ".25ms"});
      case 3:
        return number(1'000'000) + pick(std::vector<std::string>{"us", "ns"});
      case 4:
        return number(10'000) + "h";  // often above 366 days
      default:
        return number(100) + pick(std::vector<std::string>{"", "min", "d", "ms"});  // often no or a wrong unit
    }
  }

  std::string position() {
    switch (below(8)) {
      case 0:
        return " first";
      case 1:
        return " last";
      case 2:
        return " before " + existing_rule();
      case 3:
        return " after " + existing_rule();
      default:
        return "";
    }
  }

  std::string dscp() {
    static const std::vector<std::string> kNames{"be",   "df",   "cs0",  "cs3",  "cs7",  "af11", "af12",
                                                 "af13", "af22", "af33", "af41", "af43", "ef",   "va"};
    return chance(50) ? pick(kNames) : number(64);
  }

  std::string prefix(bool ipv6) {
    dataplane::Prefix p;
    p.ipv6 = ipv6;
    const unsigned max = ipv6 ? 128 : 32;
    p.length = static_cast<std::uint8_t>(below(max + 1));
    for (unsigned byte = 0; byte < max / 8; ++byte)
      p.address[byte] = chance(50) ? static_cast<std::uint8_t>(rng_()) : 0;
    if (!chance(3))  // sometimes host bits stay set: an error
      for (unsigned bit = p.length; bit < max; ++bit)
        p.address[bit / 8] &= static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
    std::string text = detail::format_prefix(p);
    if (chance(50) && text.find('/') == std::string::npos) text += ipv6 ? "/128" : "/32";
    return text;
  }

  std::string ports() {
    std::string text;
    for (std::uint64_t i = 0, n = 1 + below(3); i < n; ++i) {
      if (i) text += ",";
      const std::uint64_t first = below(65536);
      text += chance(50)
                  ? std::to_string(first)
                  : cat(std::to_string(first), "-", std::to_string(first + below(65536 - first + (chance(2) ? 0 : 1))));
    }
    return text;
  }

  std::string action() {
    switch (below(6)) {
      case 0:
        return "forward";
      case 1:
        return "drop";
      case 2:
        return "remark " + dscp();
      case 3:
        return "pcp " + number(8);
      case 4:
        return cat("remark ", dscp(), " pcp ", number(8));
      default:
        return cat("pcp ", number(8), " remark ", dscp());
    }
  }

  // COLOR VALUES [COLOR VALUES ...] after the kind; sometimes a value out of range, a reversed range,
  // or a value under two colors.
  std::string color_map_body() {
    const bool dscp_kind = chance(60);
    const unsigned max = dscp_kind ? 63 : 7;
    std::vector<std::string> colors{"green", "yellow", "red"};
    std::shuffle(colors.begin(), colors.end(), rng_);
    std::string text = dscp_kind ? "dscp" : "pcp";
    for (std::uint64_t i = 0, n = 1 + below(chance(90) ? 2 : 3); i < n; ++i) {
      text += cat(" ", colors[i], " ");
      for (std::uint64_t item = 0, items = 1 + below(dscp_kind ? 4 : 2); item < items; ++item) {
        if (item) text += ",";
        const std::uint64_t first = below(max + (chance(2) ? 2 : 1));
        if (dscp_kind && chance(40))
          text += dscp();
        else if (chance(30))
          text += cat(std::to_string(first), "-", std::to_string(first + below(4) - (chance(3) ? 1 : 0)));
        else
          text += std::to_string(first);
      }
    }
    return text;
  }

  std::string duration() {
    switch (below(7)) {
      case 0:
        return number(26) + "h";
      case 1:
        return number(1441) + "m";
      case 2:
        return number(86'401) + "s";
      case 3:
        return number(86'400'001) + "ms";
      case 4:
        return std::to_string(1000 * below(86'400'001) + (chance(50) ? 0 : below(1000))) + "us";
      case 5:
        return std::to_string(1'000'000 * below(100'000) + (chance(50) ? 0 : below(1'000'000))) + "ns";
      default:
        return number(100) + "." + number(1000) + pick(std::vector<std::string>{"s", "m", "h", "ms"});
    }
  }

  std::string capacity() {
    switch (below(4)) {
      case 0:
        return number(300'000'000);
      case 1:
        return number(300'000) + "k";
      case 2:
        return number(300) + "m";
      default:
        return number(10) + pick(std::vector<std::string>{".5k", ".25m", ".125k", ".001k"});
    }
  }

  std::string per_key() {
    static const std::vector<std::string> kKinds{"src", "dst", "src+dport", "5-tuple"};
    std::string text = pick(kKinds);
    if (chance(50)) {
      text += "/" + number(chance(97) ? 33 : 40);
      if (chance(50)) text += "," + number(chance(97) ? 129 : 140);
    }
    return text;
  }

  std::string rule_body() {
    static const std::vector<std::string> kProtocols{"tcp", "udp", "sctp", "icmp", "icmpv6", "6", "17", "47", "0"};
    static const std::vector<std::string> kColors{"green", "yellow", "red"};
    std::vector<std::string> clauses;
    if (chance(20)) {
      std::string list = number(65536);
      for (std::uint64_t i = below(3); i > 0; --i) list += "," + number(65536);
      clauses.push_back("port " + list);
    }
    if (chance(20)) clauses.push_back("vlan " + number(4096));
    const bool ipv6 = chance(40);
    if (chance(30)) clauses.push_back("src " + prefix(chance(98) ? ipv6 : !ipv6));
    if (chance(30)) clauses.push_back("dst " + prefix(chance(98) ? ipv6 : !ipv6));
    const std::string protocol = chance(40) ? pick(kProtocols) : "";
    if (!protocol.empty()) clauses.push_back("proto " + protocol);
    const bool has_ports = protocol.empty() || protocol == "tcp" || protocol == "udp" || protocol == "sctp" ||
                           protocol == "6" || protocol == "17";
    if (chance(has_ports ? 25 : 2)) clauses.push_back("sport " + ports());
    if (chance(has_ports ? 25 : 2)) clauses.push_back("dport " + ports());
    if (chance(20)) {
      std::string list = dscp();
      for (std::uint64_t i = below(3); i > 0; --i) list += "," + dscp();
      clauses.push_back("dscp " + list);
    }
    if (chance(98)) clauses.push_back("profile " + existing_profile());
    const bool per = chance(35);
    if (per) clauses.push_back("per " + per_key());
    if (chance(per ? 40 : 1)) clauses.push_back("timeout " + duration());
    if (chance(per ? 40 : 1)) clauses.push_back("capacity " + capacity());
    if (chance(per ? 30 : 1))
      clauses.push_back("fallback " + pick(std::vector<std::string>{"aggregate", "default", "drop"}));
    if (chance(25)) clauses.push_back("parent " + existing_profile());
    const std::uint64_t input = below(100);
    const bool aware = input < 50;
    if (input < 25) {
      clauses.push_back("input dscp");
    } else if (input < 50) {
      // input map [pcp-map NAME] [dscp-map NAME] [unmapped COLOR], in any order, at least one map
      std::vector<std::string> parts;
      const bool pcp_map = chance(60), dscp_map = !pcp_map || chance(50);
      if (pcp_map || chance(2)) parts.push_back("pcp-map " + existing_map(dataplane::ColorMapKind::pcp));
      if (dscp_map && !chance(2)) parts.push_back("dscp-map " + existing_map(dataplane::ColorMapKind::dscp));
      if (chance(40)) parts.push_back("unmapped " + pick(kColors));
      std::shuffle(parts.begin(), parts.end(), rng_);
      std::string text = "input map";
      for (const auto& part : parts) text += " " + part;
      clauses.push_back(text);
    } else if (input < 60) {
      clauses.push_back("input blind");
    }
    if (chance(30)) {
      const int adjust = static_cast<int>(below(200'001)) - 100'000;
      std::string length = pick(std::vector<std::string>{"l1", "l2", "l3"});
      if (chance(60)) length += (adjust >= 0 ? "+" : "") + std::to_string(chance(50) ? adjust : adjust / 10'000);
      clauses.push_back("length " + length);
    }
    for (const auto& color : kColors)
      if (chance(30)) clauses.push_back(cat(color, " ", action()));
    if (aware || chance(2)) {
      for (std::size_t in = 0; in < 3; ++in)
        for (std::size_t out = chance(2) ? 0 : in; out < 3; ++out)
          if (chance(20)) clauses.push_back(cat(kColors[in], ">", kColors[out], " ", action()));
    }
    if (chance(30)) std::shuffle(clauses.begin(), clauses.end(), rng_);  // any order means the same
    std::string text;
    for (const auto& clause : clauses) text += " " + clause;
    return text;
  }

  std::mt19937_64 rng_;
  const Policy* policy_ = nullptr;
};

TEST(LanguageRandom, ReachablePoliciesPrintBackAndFailuresChangeNothing) {
  // LANGUAGE_RANDOM_POLICIES=N runs a longer search; LANGUAGE_RANDOM_VERBOSE prints every error.
  const char* policies_env = std::getenv("LANGUAGE_RANDOM_POLICIES");
  const int kPolicies = policies_env ? std::atoi(policies_env) : 3000;
  constexpr int kCommandsPerPolicy = 40;
  std::size_t succeeded = 0, failed = 0, rules = 0, profiles = 0, limiters = 0, maps = 0, per_key = 0, parents = 0,
              mapped = 0;
  for (int seed = 0; seed < kPolicies; ++seed) {
    CommandGenerator generate(static_cast<std::uint64_t>(seed));
    Policy policy;
    // execute() edits the policy in place, load() runs a text on its indexed draft: the commands that
    // succeed one by one load as a text to the same policy, and one that fails fails there too.
    std::string succeeded_text;
    std::size_t succeeded_lines = 0;
    for (int i = 0; i < kCommandsPerPolicy; ++i) {
      const std::string line = generate.command(policy);
      const Policy before = policy;
      const auto result = execute(policy, line);
      if (result.ok()) {
        ++succeeded;
        succeeded_text.append(line).append("\n");
        ++succeeded_lines;
      } else {
        ++failed;
        if (std::getenv("LANGUAGE_RANDOM_VERBOSE")) std::cerr << result.error().message << "\n";
        ASSERT_EQ(policy, before) << "changed by a failed command: " << line;
        ASSERT_FALSE(result.error().message.empty());
        // A token's error starts with it, quoted (policer/quote.hpp); a missing token's has no subject
        // and quotes no empty token.
        const std::string& subject = result.error().subject;
        ASSERT_EQ(result.error().message.find(subject.empty() ? "''" : quote(subject) + ": "),
                  subject.empty() ? std::string::npos : 0u)
            << result.error().message;
        const auto in_text = load(succeeded_text + line);
        ASSERT_FALSE(in_text.ok()) << succeeded_text << line;
        ASSERT_EQ(in_text.error().message,
                  "line " + std::to_string(succeeded_lines + 1) + ": " + result.error().message);
        ASSERT_EQ(in_text.error().subject, subject);
      }
    }
    const auto as_text = load(succeeded_text);
    ASSERT_TRUE(as_text.ok()) << succeeded_text << as_text.error().message;
    ASSERT_EQ(*as_text, policy) << succeeded_text;
    rules += policy.rules.size();
    profiles += policy.profiles.size();
    for (const auto& profile : policy.profiles) limiters += policer::is_limiter(profile.params.algorithm);
    maps += policy.color_maps.size();
    for (const auto& rule : policy.rules) {
      per_key += rule.per_key.kind != dataplane::KeyKind::none;
      parents += rule.parent.has_value();
      mapped += rule.input == dataplane::InputColor::mapped;
    }
    const std::string printed = print(policy);
    const auto loaded = load(printed);
    ASSERT_TRUE(loaded.ok()) << printed << loaded.error().message;
    ASSERT_EQ(*loaded, policy) << printed;
    ASSERT_EQ(print(*loaded), printed);
  }
  // The generator must reach interesting policies, not fail everything.
  EXPECT_GT(succeeded, failed / 2) << succeeded << " succeeded, " << failed << " failed";
  EXPECT_GT(rules, static_cast<std::size_t>(kPolicies) * 5);
  EXPECT_GT(profiles, static_cast<std::size_t>(kPolicies) * 2);
  EXPECT_GT(limiters, static_cast<std::size_t>(kPolicies));
  EXPECT_GT(maps, static_cast<std::size_t>(kPolicies));
  EXPECT_GT(per_key, static_cast<std::size_t>(kPolicies));
  EXPECT_GT(parents, static_cast<std::size_t>(kPolicies));
  EXPECT_GT(mapped, static_cast<std::size_t>(kPolicies) / 2);
  std::cout << "random: " << succeeded << " commands succeeded, " << failed << " failed; " << rules << " rules ("
            << per_key << " per-key, " << parents << " with a parent, " << mapped << " with input maps), " << profiles
            << " profiles (" << limiters << " limiters) and " << maps << " color maps in " << kPolicies << " final policies\n";
}

}  // namespace
}  // namespace tricolor::control
