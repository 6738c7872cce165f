#pragma once
// Store: where the commands find and change profiles, color maps and rules. Two kinds, with the same
// behaviour (the fuzz target and the random test compare them):
//   - Draft (draft.hpp), for load(): indexes, so that a text of any size loads in linear time;
//   - PolicyStore (below), for execute(): the Policy itself, scanned, so that one command costs
//     O(size of the policy) with a small constant and copies nothing.
// A command checks everything before it changes anything: each change below is one the command has
// checked in full (the names exist or not, nothing in use is deleted). Internal to control/.
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "dataplane/engine/policy.hpp"

namespace tricolor::control::detail {

// Where `rule add|change` puts a rule.
struct Position {
  enum class Where : std::uint8_t { first, last, before, after } where = Where::last;
  std::string_view anchor;  // the rule named by before/after (it exists, and is not the rule placed)
};

class Store {
 public:
  virtual ~Store() = default;

  virtual const dataplane::ProfileDef* find_profile(std::string_view name) const = 0;
  virtual const dataplane::ColorMap* find_color_map(std::string_view name) const = 0;
  virtual const dataplane::Rule* find_rule(std::string_view name) const = 0;
  // Whether any rule uses the profile (or has it as parent), or the color map (with input map).
  virtual bool profile_used(std::string_view name) const = 0;
  virtual bool color_map_used(std::string_view name) const = 0;

  virtual void add_profile(dataplane::ProfileDef profile) = 0;  // last in definition order
  virtual void change_profile(std::string_view name, const policer::Params& params) = 0;
  virtual void delete_profile(std::string_view name) = 0;
  virtual void add_color_map(dataplane::ColorMap map) = 0;  // last in definition order
  virtual void change_color_map(dataplane::ColorMap map) = 0;  // the one of that name, in its place
  virtual void delete_color_map(std::string_view name) = 0;
  virtual void add_rule(dataplane::Rule rule, const Position& position) = 0;
  // A new body for the rule of that name; it stays where it is unless a position is given.
  virtual void change_rule(dataplane::Rule rule, const std::optional<Position>& position) = 0;
  virtual void delete_rule(std::string_view name) = 0;
  virtual void set_default_action(const dataplane::Action& action) = 0;

  // In policy order: profiles and color maps as defined, rules first to last.
  virtual void each_profile(const std::function<void(const dataplane::ProfileDef&)>& visit) const = 0;
  virtual void each_color_map(const std::function<void(const dataplane::ColorMap&)>& visit) const = 0;
  virtual void each_rule(const std::function<void(const dataplane::Rule&)>& visit) const = 0;
  virtual const dataplane::Action& default_action() const = 0;
};

// The policy itself: look-ups and in-use checks scan it, a rule placed first moves the others. One
// command at a time, as the old language did.
class PolicyStore final : public Store {
 public:
  explicit PolicyStore(dataplane::Policy& policy) : policy_(policy) {}

  const dataplane::ProfileDef* find_profile(std::string_view name) const override {
    return policy_.find_profile(name);
  }
  const dataplane::ColorMap* find_color_map(std::string_view name) const override {
    return policy_.find_color_map(name);
  }
  const dataplane::Rule* find_rule(std::string_view name) const override { return policy_.find_rule(name); }
  bool profile_used(std::string_view name) const override;
  bool color_map_used(std::string_view name) const override;

  void add_profile(dataplane::ProfileDef profile) override;
  void change_profile(std::string_view name, const policer::Params& params) override;
  void delete_profile(std::string_view name) override;
  void add_color_map(dataplane::ColorMap map) override;
  void change_color_map(dataplane::ColorMap map) override;
  void delete_color_map(std::string_view name) override;
  void add_rule(dataplane::Rule rule, const Position& position) override;
  void change_rule(dataplane::Rule rule, const std::optional<Position>& position) override;
  void delete_rule(std::string_view name) override;
  void set_default_action(const dataplane::Action& action) override { policy_.default_action = action; }

  void each_profile(const std::function<void(const dataplane::ProfileDef&)>& visit) const override;
  void each_color_map(const std::function<void(const dataplane::ColorMap&)>& visit) const override;
  void each_rule(const std::function<void(const dataplane::Rule&)>& visit) const override;
  const dataplane::Action& default_action() const override { return policy_.default_action; }

 private:
  dataplane::Policy& policy_;
};

// Whether the rule uses the profile (for its meters or as parent) or the color map (with input map).
bool uses_profile(const dataplane::Rule& rule, std::string_view profile);
bool uses_color_map(const dataplane::Rule& rule, std::string_view map);

}  // namespace tricolor::control::detail
