#pragma once
// Draft: the Store (store.hpp) of load(): the policy the commands of a text change, built so that every
// command costs the same however large the policy has grown, and a text of any size loads in linear
// time (issue 7):
//   - profiles and color maps in definition order, found by name through an index; a delete leaves a
//     hole, so nothing moves (holes are closed up once they outnumber the live items);
//   - rules in a linked list, found by name through an index: adding first, last, before or after a
//     rule, moving or deleting one moves no other rule;
//   - how many references rules make to each profile and color map name, so "is it in use" is one
//     look-up (the rules that use it are listed by a scan only when it is, to name them in the error).
// A Draft starts as a copy of a Policy and finish() turns it back into one. Names are unique in each
// namespace, as the language keeps them (in a base with duplicate names, the first is the one found).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "control/language/store.hpp"
#include "dataplane/engine/policy.hpp"

namespace tricolor::control::detail {

// The hash of the name indexes: SipHash-1-3 keyed by a secret drawn once per process, so that a text
// cannot choose names that share a bucket and make every look-up a scan.
struct NameHash {
  using is_transparent = void;  // look-ups by string_view, without building a string
  std::size_t operator()(std::string_view name) const noexcept;
};
template <class Value>
using NameMap = std::unordered_map<std::string, Value, NameHash, std::equal_to<>>;

// Profiles or color maps (T has a `name`), with the uses rules make of each name.
template <class T>
class NamedTable {
 public:
  NamedTable() = default;
  explicit NamedTable(const std::vector<T>& items);

  const T* find(std::string_view name) const;
  T* find(std::string_view name);
  void add(T item);                   // its name is not in the table
  void erase(std::string_view name);  // its name is in the table
  // A rule starts (+1) or stops (-1) using the name; the name need not be in the table.
  void use(std::string_view name, int delta);
  bool used(std::string_view name) const;

  template <class Visit>
  void each(Visit visit) const {
    for (const auto& item : items_)
      if (item) visit(*item);
  }
  std::vector<T> take() &&;

 private:
  static constexpr std::size_t kAbsent = SIZE_MAX;
  static constexpr std::size_t kMinCompaction = 64;  // holes always tolerated: small tables never compact
  void compact();
  struct Slot {
    std::size_t position = kAbsent;  // in items_, or kAbsent: not defined, only used
    std::size_t uses = 0;
  };
  std::vector<std::optional<T>> items_;  // in definition order; nullopt where one was deleted
  std::size_t live_ = 0;
  NameMap<Slot> slots_;
};

class Draft final : public Store {
 public:
  explicit Draft(const dataplane::Policy& base);
  dataplane::Policy finish() &&;

  const dataplane::ProfileDef* find_profile(std::string_view name) const override { return profiles_.find(name); }
  const dataplane::ColorMap* find_color_map(std::string_view name) const override {
    return color_maps_.find(name);
  }
  const dataplane::Rule* find_rule(std::string_view name) const override;
  bool profile_used(std::string_view name) const override { return profiles_.used(name); }
  bool color_map_used(std::string_view name) const override { return color_maps_.used(name); }

  void add_profile(dataplane::ProfileDef profile) override { profiles_.add(std::move(profile)); }
  void change_profile(std::string_view name, const policer::Params& params) override {
    profiles_.find(name)->params = params;
  }
  void delete_profile(std::string_view name) override { profiles_.erase(name); }
  void add_color_map(dataplane::ColorMap map) override { color_maps_.add(std::move(map)); }
  void change_color_map(dataplane::ColorMap map) override { *color_maps_.find(map.name) = std::move(map); }
  void delete_color_map(std::string_view name) override { color_maps_.erase(name); }
  void add_rule(dataplane::Rule rule, const Position& position) override;
  void change_rule(dataplane::Rule rule, const std::optional<Position>& position) override;
  void delete_rule(std::string_view name) override;
  void set_default_action(const dataplane::Action& action) override { default_action_ = action; }

  void each_profile(const std::function<void(const dataplane::ProfileDef&)>& visit) const override {
    profiles_.each(visit);
  }
  void each_color_map(const std::function<void(const dataplane::ColorMap&)>& visit) const override {
    color_maps_.each(visit);
  }
  void each_rule(const std::function<void(const dataplane::Rule&)>& visit) const override {
    for (const auto& rule : rules_) visit(rule);
  }
  const dataplane::Action& default_action() const override { return default_action_; }

 private:
  using RuleList = std::list<dataplane::Rule>;
  RuleList::iterator place(const Position& position);  // where a rule at `position` goes
  void count_uses(const dataplane::Rule& rule, int delta);

  NamedTable<dataplane::ProfileDef> profiles_;
  NamedTable<dataplane::ColorMap> color_maps_;
  RuleList rules_;
  NameMap<RuleList::iterator> rule_index_;
  dataplane::Action default_action_;
};

}  // namespace tricolor::control::detail
