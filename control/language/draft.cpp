#include "control/language/draft.hpp"

#include <array>
#include <cstring>
#include <iterator>
#include <random>
#include <utility>

namespace tricolor::control::detail {

using dataplane::ColorMap;
using dataplane::InputColor;
using dataplane::Policy;
using dataplane::ProfileDef;
using dataplane::Rule;

// ---- NameHash: SipHash-1-3 (Aumasson and Bernstein, 2012; the hash of Rust's HashMap) -------------

namespace {

struct SipKey {
  std::uint64_t k0, k1;
};

// Drawn once per process from std::random_device (getrandom(2) on Linux). The hash only places names
// in buckets: nothing printed or compared depends on it, so runs stay reproducible.
const SipKey& sip_key() {
  static const SipKey key = [] {
    std::random_device device;
    auto word = [&] { return std::uint64_t{device()} << 32 | device(); };
    return SipKey{word(), word()};
  }();
  return key;
}

constexpr std::uint64_t rotl(std::uint64_t x, int b) { return x << b | x >> (64 - b); }

struct SipState {
  std::uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  }
  void absorb(std::uint64_t m) {  // one compression round (the "1" of SipHash-1-3)
    v3 ^= m;
    round();
    v0 ^= m;
  }
};

}  // namespace

std::size_t NameHash::operator()(std::string_view name) const noexcept {
  const SipKey& key = sip_key();
  SipState s{key.k0 ^ 0x736f6d6570736575ULL, key.k1 ^ 0x646f72616e646f6dULL, key.k0 ^ 0x6c7967656e657261ULL,
             key.k1 ^ 0x7465646279746573ULL};
  const std::size_t whole = name.size() / 8 * 8;
  for (std::size_t i = 0; i < whole; i += 8) {
    std::uint64_t m;
    std::memcpy(&m, name.data() + i, 8);
    s.absorb(m);
  }
  std::uint64_t last = static_cast<std::uint64_t>(name.size()) << 56;
  for (std::size_t i = whole; i < name.size(); ++i)
    last |= std::uint64_t{static_cast<unsigned char>(name[i])} << (8 * (i - whole));
  s.absorb(last);
  s.v2 ^= 0xff;
  for (int i = 0; i < 3; ++i) s.round();  // three finalization rounds
  return static_cast<std::size_t>(s.v0 ^ s.v1 ^ s.v2 ^ s.v3);
}

// ---- NamedTable --------------------------------------------------------------------------------------

template <class T>
NamedTable<T>::NamedTable(const std::vector<T>& items) {
  items_.reserve(items.size());
  slots_.reserve(items.size());
  for (const T& item : items) {
    if (find(item.name)) {  // a duplicate name, which the language never makes: the first is found
      items_.emplace_back(item);
      ++live_;
      continue;
    }
    add(item);
  }
}

template <class T>
const T* NamedTable<T>::find(std::string_view name) const {
  const auto it = slots_.find(name);
  if (it == slots_.end() || it->second.position == kAbsent) return nullptr;
  return &*items_[it->second.position];
}

template <class T>
T* NamedTable<T>::find(std::string_view name) {
  return const_cast<T*>(std::as_const(*this).find(name));
}

template <class T>
void NamedTable<T>::add(T item) {
  auto it = slots_.find(std::string_view(item.name));
  if (it == slots_.end()) it = slots_.emplace(item.name, Slot{}).first;
  it->second.position = items_.size();
  items_.emplace_back(std::move(item));
  ++live_;
}

template <class T>
void NamedTable<T>::erase(std::string_view name) {
  const auto it = slots_.find(name);
  items_[it->second.position].reset();
  --live_;
  it->second.position = kAbsent;
  if (it->second.uses == 0) slots_.erase(it);
  // Once holes outnumber the live items, close them up: O(live) now, so O(1) per delete over time,
  // and memory stays in proportion to what is live (an add/delete loop does not grow it).
  if (items_.size() > 2 * live_ + kMinCompaction) compact();
}

template <class T>
void NamedTable<T>::compact() {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < items_.size(); ++i) {
    if (!items_[i]) continue;
    Slot& slot = slots_.find(std::string_view(items_[i]->name))->second;
    if (slot.position == i) slot.position = kept;  // else a duplicate name from a base: not indexed
    if (kept != i) items_[kept] = std::move(items_[i]);
    ++kept;
  }
  items_.resize(kept);
}

template <class T>
void NamedTable<T>::use(std::string_view name, int delta) {  // delta: +1 or -1
  auto it = slots_.find(name);
  if (it == slots_.end()) it = slots_.emplace(std::string(name), Slot{}).first;
  if (delta > 0)
    ++it->second.uses;
  else
    --it->second.uses;  // only what was counted is uncounted
  if (it->second.uses == 0 && it->second.position == kAbsent) slots_.erase(it);
}

template <class T>
bool NamedTable<T>::used(std::string_view name) const {
  const auto it = slots_.find(name);
  return it != slots_.end() && it->second.uses > 0;
}

template <class T>
std::vector<T> NamedTable<T>::take() && {
  std::vector<T> items;
  items.reserve(live_);
  for (auto& item : items_)
    if (item) items.push_back(std::move(*item));
  return items;
}

template class NamedTable<ProfileDef>;
template class NamedTable<ColorMap>;

// ---- Draft -------------------------------------------------------------------------------------------

Draft::Draft(const Policy& base)
    : profiles_(base.profiles),
      color_maps_(base.color_maps),
      rules_(base.rules.begin(), base.rules.end()),
      default_action_(base.default_action) {
  rule_index_.reserve(base.rules.size());
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    rule_index_.emplace(it->name, it);
    count_uses(*it, +1);
  }
}

Policy Draft::finish() && {
  Policy policy;
  policy.profiles = std::move(profiles_).take();
  policy.color_maps = std::move(color_maps_).take();
  policy.rules.reserve(rules_.size());
  std::move(rules_.begin(), rules_.end(), std::back_inserter(policy.rules));
  policy.default_action = default_action_;
  return policy;
}

const Rule* Draft::find_rule(std::string_view name) const {
  const auto it = rule_index_.find(name);
  return it == rule_index_.end() ? nullptr : &*it->second;
}

// A rule uses its profile, its parent and its cluster; with input map, its color maps.
void Draft::count_uses(const Rule& rule, int delta) {
  profiles_.use(rule.profile, delta);
  if (rule.parent) profiles_.use(*rule.parent, delta);
  if (rule.cluster) profiles_.use(*rule.cluster, delta);
  if (rule.input != InputColor::mapped) return;
  if (rule.pcp_map) color_maps_.use(*rule.pcp_map, delta);
  if (rule.dscp_map) color_maps_.use(*rule.dscp_map, delta);
}

Draft::RuleList::iterator Draft::place(const Position& position) {
  using Where = Position::Where;
  switch (position.where) {
    case Where::first:
      return rules_.begin();
    case Where::last:
      return rules_.end();
    case Where::before:
      return rule_index_.find(position.anchor)->second;
    case Where::after:
      return std::next(rule_index_.find(position.anchor)->second);
  }
  return rules_.end();
}

void Draft::add_rule(Rule rule, const Position& position) {
  count_uses(rule, +1);
  const auto it = rules_.insert(place(position), std::move(rule));
  rule_index_.emplace(it->name, it);
}

void Draft::change_rule(Rule rule, const std::optional<Position>& position) {
  const auto it = rule_index_.find(std::string_view(rule.name))->second;
  count_uses(*it, -1);
  count_uses(rule, +1);
  // The anchor is another rule, so it stays where it is while this one moves.
  if (position) rules_.splice(place(*position), rules_, it);
  *it = std::move(rule);
}

void Draft::delete_rule(std::string_view name) {
  const auto index = rule_index_.find(name);
  const auto it = index->second;
  count_uses(*it, -1);
  rule_index_.erase(index);
  rules_.erase(it);
}

}  // namespace tricolor::control::detail
