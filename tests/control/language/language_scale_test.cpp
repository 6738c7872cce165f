// Loading is linear (issue 7, finding 10): a config of 200 000 profiles and 200 000 rules, placed first,
// last, before and after other rules, changed, moved and deleted, with list and show lines among them,
// loads to exactly the policy a simple model of the commands predicts.
//
// This is what fails a regression to quadratic loading: it runs as its own meson test ('language-scale')
// with a timeout (240 s) that linear loading meets many times over, even under ASan (15-30 s), and that
// the quadratic code cannot (a linear search per name and a vector insert per `first`: more than 20
// minutes here). Nothing is timed inside the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "control/language/language.hpp"
#include "dataplane/replay/splitmix64.hpp"

namespace tricolor::control {
namespace {

constexpr std::size_t kProfiles = 200'000;
constexpr std::size_t kRules = 200'000;

// What the commands should make: rules in order, profiles in definition order. std::map indexes, so
// the model shares no code and no data structure choice with the Draft.
struct ModelRule {
  std::string name;
  std::string profile;
  std::uint16_t vlan;
};
struct ModelProfile {
  std::string name;
  std::uint64_t kbit;
};

class Model {
 public:
  // Profiles.
  std::string add_profile(std::size_t number, std::uint64_t kbit) {
    const std::string name = "p" + std::to_string(number);
    profile_at_[name] = profiles_.insert(profiles_.end(), ModelProfile{name, kbit});
    live_profiles_.push_back(name);
    return name;
  }
  const std::string& random_profile(SplitMix64& r) const { return live_profiles_[r.below(live_profiles_.size())]; }
  void change_profile(const std::string& name, std::uint64_t kbit) { profile_at_.at(name)->kbit = kbit; }
  std::size_t uses(const std::string& profile) const {
    const auto it = uses_.find(profile);
    return it == uses_.end() ? 0 : it->second;
  }
  void delete_profile(std::size_t live_index) {
    const std::string name = live_profiles_[live_index];
    profiles_.erase(profile_at_.at(name));
    profile_at_.erase(name);
    live_profiles_[live_index] = live_profiles_.back();
    live_profiles_.pop_back();
  }
  std::size_t live_profiles() const { return live_profiles_.size(); }
  const std::string& live_profile(std::size_t i) const { return live_profiles_[i]; }

  // Rules. `where` is "first", "last", "before NAME" or "after NAME" (or "" for a change in place).
  void add_rule(const ModelRule& rule, const std::string& where) {
    const auto it = rules_.insert(position(where), rule);
    rule_at_[rule.name] = it;
    live_rules_.push_back(rule.name);
    ++uses_[rule.profile];
  }
  void change_rule(const ModelRule& rule, const std::string& where) {
    auto it = rule_at_.at(rule.name);
    --uses_[it->profile];
    ++uses_[rule.profile];
    if (!where.empty()) {
      rules_.erase(it);
      it = rules_.insert(position(where), rule);
      rule_at_[rule.name] = it;
    } else {
      *it = rule;
    }
  }
  void delete_rule(std::size_t live_index) {
    const std::string name = live_rules_[live_index];
    const auto it = rule_at_.at(name);
    --uses_[it->profile];
    rules_.erase(it);
    rule_at_.erase(name);
    live_rules_[live_index] = live_rules_.back();
    live_rules_.pop_back();
  }
  std::size_t live_rules() const { return live_rules_.size(); }
  const std::string& live_rule(std::size_t i) const { return live_rules_[i]; }

  const std::list<ModelRule>& rules() const { return rules_; }
  const std::list<ModelProfile>& profiles() const { return profiles_; }

 private:
  std::list<ModelRule>::iterator position(const std::string& where) {
    if (where == "first") return rules_.begin();
    if (where == "last") return rules_.end();
    const auto space = where.find(' ');
    const auto anchor = rule_at_.at(where.substr(space + 1));
    return where.starts_with("before") ? anchor : std::next(anchor);
  }

  std::list<ModelRule> rules_;
  std::map<std::string, std::list<ModelRule>::iterator> rule_at_;
  std::vector<std::string> live_rules_;
  std::list<ModelProfile> profiles_;
  std::map<std::string, std::list<ModelProfile>::iterator> profile_at_;
  std::vector<std::string> live_profiles_;
  std::map<std::string, std::size_t> uses_;
};

std::string rule_line(std::string_view verb, const ModelRule& rule, const std::string& where) {
  std::string line = std::string("rule ").append(verb).append(" ").append(rule.name);
  if (!where.empty()) line.append(" ").append(where);
  return line.append(" vlan ").append(std::to_string(rule.vlan)).append(" profile ").append(rule.profile);
}

std::string profile_line(std::string_view verb, const std::string& name, std::uint64_t kbit) {
  return std::string("profile ").append(verb).append(" ").append(name).append(" 1r2c cir ")
      .append(std::to_string(kbit)).append("kbit cbs 1k");
}

TEST(LanguageScale, HundredsOfThousandsOfCommandsLoadToTheModel) {
  SplitMix64 r{7};
  Model model;
  std::string text;
  std::size_t profile_number = 0, rule_number = 0;

  // Every command is also applied to the model; each first rule is added "first" so that a vector
  // insert would move every rule before it.
  for (std::size_t i = 0; i < kProfiles; ++i) {
    const std::uint64_t kbit = 8 * (1 + r.below(100'000));
    text.append(profile_line("add", model.add_profile(profile_number++, kbit), kbit)).append("\n");
  }
  auto random_where = [&]() -> std::string {
    if (model.live_rules() == 0) return "first";
    switch (r.below(6)) {
      case 0: case 1: return "first";
      case 2: return "last";
      case 3: return "before " + model.live_rule(r.below(model.live_rules()));
      default: return "after " + model.live_rule(r.below(model.live_rules()));
    }
  };
  std::size_t changes = 0, moves = 0, deletes = 0, profile_changes = 0, profile_deletes = 0;
  while (rule_number < kRules) {
    const std::uint64_t pick = r.below(100);
    if (pick < 70 || model.live_rules() < 2) {
      const ModelRule rule{"r" + std::to_string(rule_number++), model.random_profile(r),
                           static_cast<std::uint16_t>(r.below(4096))};
      const std::string where = random_where();
      model.add_rule(rule, where);
      text.append(rule_line("add", rule, where)).append("\n");
    } else if (pick < 85) {
      const ModelRule rule{model.live_rule(r.below(model.live_rules())), model.random_profile(r),
                           static_cast<std::uint16_t>(r.below(4096))};
      std::string where;
      if (r.chance(50)) {
        do where = random_where();
        while (where.ends_with(" " + rule.name));  // not before or after itself
        ++moves;
      }
      model.change_rule(rule, where);
      text.append(rule_line("change", rule, where)).append("\n");
      ++changes;
    } else if (pick < 92) {
      const std::size_t which = r.below(model.live_rules());
      text.append("rule delete ").append(model.live_rule(which)).append("\n");
      model.delete_rule(which);
      ++deletes;
    } else if (pick < 96) {
      const std::string name = model.random_profile(r);
      const std::uint64_t kbit = 8 * (1 + r.below(100'000));
      model.change_profile(name, kbit);
      text.append(profile_line("change", name, kbit)).append("\n");
      ++profile_changes;
    } else {
      // Delete an unused profile and add a new one (it goes last in definition order).
      const std::size_t which = r.below(model.live_profiles());
      if (model.uses(model.live_profile(which)) == 0) {
        text.append("profile delete ").append(model.live_profile(which)).append("\n");
        model.delete_profile(which);
        ++profile_deletes;
      }
      const std::uint64_t kbit = 8 * (1 + r.below(100'000));
      text.append(profile_line("add", model.add_profile(profile_number++, kbit), kbit)).append("\n");
    }
    // Lines whose output nobody reads: checked, never formatted.
    if (r.chance(2)) text.append(r.chance(50) ? "show\n" : "rule list\n");
  }
  ASSERT_GT(moves, 10'000u);
  ASSERT_GT(deletes, 10'000u);
  ASSERT_GT(profile_changes, 5'000u);
  ASSERT_GT(profile_deletes, 1'000u);
  ASSERT_GT(changes, moves);

  const auto loaded = load(text);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;

  ASSERT_EQ(loaded->rules.size(), model.rules().size());
  std::size_t i = 0;
  for (const ModelRule& expected : model.rules()) {
    const dataplane::Rule& rule = loaded->rules[i++];
    ASSERT_EQ(rule.name, expected.name) << "rule " << i - 1;
    ASSERT_EQ(rule.profile, expected.profile) << rule.name;
    ASSERT_EQ(rule.match.vlan, expected.vlan) << rule.name;
  }
  ASSERT_EQ(loaded->profiles.size(), model.profiles().size());
  i = 0;
  for (const ModelProfile& expected : model.profiles()) {
    const dataplane::ProfileDef& profile = loaded->profiles[i++];
    ASSERT_EQ(profile.name, expected.name) << "profile " << i - 1;
    ASSERT_EQ(profile.params.cir, expected.kbit * 1000 / 8) << profile.name;
  }

  // An "in use" check that fails names the first user in rule order and counts the others.
  std::map<std::string, std::pair<std::string, std::size_t>> users;  // profile -> first user, count
  for (const ModelRule& rule : model.rules()) {
    auto& [first, count] = users[rule.profile];
    if (count++ == 0) first = rule.name;
  }
  const auto busiest = std::max_element(users.begin(), users.end(),
                                        [](const auto& a, const auto& b) { return a.second.second < b.second.second; });
  ASSERT_GT(busiest->second.second, 2u);
  const auto refused = load("rule list\nprofile delete " + busiest->first, *loaded);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "line 2: '" + busiest->first + "': profile " + busiest->first +
                                         " is used by rule " + busiest->second.first + " and " +
                                         std::to_string(busiest->second.second - 1) +
                                         " other rules; change or delete those rules first");
}

}  // namespace
}  // namespace tricolor::control
