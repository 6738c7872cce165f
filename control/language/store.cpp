#include "control/language/store.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace tricolor::control::detail {

using dataplane::ColorMap;
using dataplane::InputColor;
using dataplane::ProfileDef;
using dataplane::Rule;

bool uses_profile(const Rule& rule, std::string_view profile) {
  return rule.profile == profile || rule.parent == profile || rule.cluster == profile;
}

bool uses_color_map(const Rule& rule, std::string_view map) {
  return rule.input == InputColor::mapped && (rule.pcp_map == map || rule.dscp_map == map);
}

bool PolicyStore::profile_used(std::string_view name) const {
  return std::any_of(policy_.rules.begin(), policy_.rules.end(), [&](const Rule& r) { return uses_profile(r, name); });
}

bool PolicyStore::color_map_used(std::string_view name) const {
  return std::any_of(policy_.rules.begin(), policy_.rules.end(),
                     [&](const Rule& r) { return uses_color_map(r, name); });
}

void PolicyStore::add_profile(ProfileDef profile) { policy_.profiles.push_back(std::move(profile)); }

void PolicyStore::change_profile(std::string_view name, const policer::Params& params) {
  for (auto& p : policy_.profiles)
    if (p.name == name) p.params = params;
}

void PolicyStore::delete_profile(std::string_view name) {
  std::erase_if(policy_.profiles, [&](const ProfileDef& p) { return p.name == name; });
}

void PolicyStore::add_color_map(ColorMap map) { policy_.color_maps.push_back(std::move(map)); }

void PolicyStore::change_color_map(ColorMap map) {
  for (auto& m : policy_.color_maps)
    if (m.name == map.name) m = map;
}

void PolicyStore::delete_color_map(std::string_view name) {
  std::erase_if(policy_.color_maps, [&](const ColorMap& m) { return m.name == name; });
}

namespace {

// Where a rule goes in `rules` (which does not hold it).
std::vector<Rule>::iterator insertion_point(std::vector<Rule>& rules, const Position& position) {
  using Where = Position::Where;
  switch (position.where) {
    case Where::first:
      return rules.begin();
    case Where::last:
      return rules.end();
    case Where::before:
    case Where::after: {
      const auto anchor =
          std::find_if(rules.begin(), rules.end(), [&](const Rule& r) { return r.name == position.anchor; });
      return position.where == Where::after ? std::next(anchor) : anchor;
    }
  }
  return rules.end();
}

}  // namespace

void PolicyStore::add_rule(Rule rule, const Position& position) {
  policy_.rules.insert(insertion_point(policy_.rules, position), std::move(rule));
}

void PolicyStore::change_rule(Rule rule, const std::optional<Position>& position) {
  auto& rules = policy_.rules;
  const auto it = std::find_if(rules.begin(), rules.end(), [&](const Rule& r) { return r.name == rule.name; });
  if (!position) {
    *it = std::move(rule);
    return;
  }
  rules.erase(it);
  rules.insert(insertion_point(rules, *position), std::move(rule));
}

void PolicyStore::delete_rule(std::string_view name) {
  std::erase_if(policy_.rules, [&](const Rule& r) { return r.name == name; });
}

void PolicyStore::each_profile(const std::function<void(const ProfileDef&)>& visit) const {
  for (const auto& p : policy_.profiles) visit(p);
}

void PolicyStore::each_color_map(const std::function<void(const ColorMap&)>& visit) const {
  for (const auto& m : policy_.color_maps) visit(m);
}

void PolicyStore::each_rule(const std::function<void(const Rule&)>& visit) const {
  for (const auto& r : policy_.rules) visit(r);
}

}  // namespace tricolor::control::detail
