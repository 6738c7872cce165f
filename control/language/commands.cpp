// The commands: profile, color-map, rule, default and show, run on a Store (store.hpp).
#include "control/language/commands.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/language/cursor.hpp"
#include "control/language/print.hpp"
#include "control/language/rule_body.hpp"
#include "control/language/values.hpp"
#include "control/language/words.hpp"
#include "policer/units.hpp"

namespace tricolor::control::detail {

using dataplane::ColorMap;
using dataplane::ColorMapKind;
using dataplane::InputColor;
using dataplane::ProfileDef;
using dataplane::Rule;
using policer::Color;
using policer::Params;

namespace {

// ---- command parts -------------------------------------------------------------------------------

// A new profile or rule name: the syntax, no keyword, unique in its namespace.
std::optional<Error> check_new_name(std::string_view name, std::string_view kind, bool exists) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto allowed = [&](char c) { return letter(c) || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'; };
  if (!letter(name[0]) || !std::all_of(name.begin(), name.end(), allowed))
    return at(name, cat("expected a ", kind, " name: ", kNameRule));
  if (name.size() > 64)
    return at(name, cat("a ", kind, " name is at most 64 characters; this one has ", std::to_string(name.size())));
  if (is_keyword(name)) return at(name, cat(name, " is a keyword and cannot name a ", kind));
  if (exists) return at(name, cat("a ", kind, " named ", name, " already exists"));
  return std::nullopt;
}

// The value of one parameter, by its kind: a rate or burst brings its unit, a duration or count none.
struct ParamValue {
  std::uint64_t value = 0;
  std::optional<policer::Unit> unit;
};

Expected<ParamValue> parse_param_value(std::string_view token, ParamKind kind, std::string_view what) {
  switch (kind) {
    case ParamKind::rate:
    case ParamKind::burst: {
      const auto quantity = kind == ParamKind::rate ? policer::parse_rate(token) : policer::parse_burst(token);
      if (!quantity) return quantity.error();
      return ParamValue{quantity->value, quantity->unit};
    }
    case ParamKind::duration: {
      const auto ns = parse_duration(token);
      if (!ns) return ns.error();
      // Too long for 64 bits: validate() would print the saturated number, not the operator's.
      if (*ns == UINT64_MAX) return at(token, cat(what, " exceeds the maximum of 366 days"));
      return ParamValue{*ns, std::nullopt};
    }
    case ParamKind::count: {
      const auto count = parse_count(token, what);
      if (!count) return count.error();
      return ParamValue{*count, std::nullopt};
    }
  }
  return ParamValue{};
}

std::string_view expected_value(ParamKind kind) {
  switch (kind) {
    case ParamKind::rate: return "a rate such as 100mbit or 10kpps";
    case ParamKind::burst: return "a burst such as 64k or 64pkt";
    case ParamKind::duration: return kExpectDuration;
    case ParamKind::count: return kExpectCount;
  }
  return "a value";
}

// The parameters of a profile, after its algorithm. Each is parsed by its kind; the checks of the
// values together (ranges, what is missing) are policer::validate()'s, its message put at the token.
Expected<Params> parse_params(Cursor& c, const AlgorithmSpec& spec) {
  Params params{.algorithm = spec.algorithm};
  std::array<std::optional<std::string_view>, kParams.size()> value_token{};
  std::optional<std::size_t> unit_source;  // the first rate or burst given: it sets the unit
  if (c.done()) return missing_after(c.previous(), cat("the parameters of ", spec.name, ": ", spec.takes));
  while (!c.done()) {
    const std::string_view key = c.take();
    const auto index = param_index(key);
    if (!index) return not_a_keyword(key, cat("expected a parameter of ", spec.name, ": ", spec.takes));
    const ParamSpec& param = kParams[*index];
    if (!takes(spec, key)) return at(key, cat(spec.name, " takes ", spec.takes));
    if (value_token[*index]) return at(key, cat(key, " given twice"));
    const auto token = c.expect(expected_value(param.kind));
    if (!token) return token.error();
    const auto value = parse_param_value(*token, param.kind, cat(spec.name, ": ", key));
    if (!value) return value.error();
    if (value->unit) {
      if (!unit_source) {
        unit_source = *index;
        params.unit = *value->unit;
      } else if (*value->unit != params.unit) {
        const ParamSpec& first = kParams[*unit_source];
        return at(*token, cat(spec.name, "'s ", key, " and ", first.name, " must both be in packets or both in bytes (",
                              first.name, " ", quote(*value_token[*unit_source]), " is in ", to_string(params.unit),
                              ")"));
      }
    }
    value_token[*index] = *token;
    param.set(params, value->value);
  }
  for (std::size_t i = 0; i < kParams.size(); ++i)
    if (!value_token[i] && kParams[i].when_not_given != 0 && takes(spec, kParams[i].name))
      kParams[i].set(params, kParams[i].when_not_given);
  if (auto valid = policer::validate(params); !valid) {
    const Error& error = valid.error();
    const auto index = param_index(error.subject);
    if (index && value_token[*index]) return at(*value_token[*index], error.message);
    const std::string_view shown = index ? placeholder(kParams[*index].kind) : "VALUE";
    return Error{"", cat("missing '", error.subject, " ", shown, "' (", error.message, ")")};
  }
  return params;
}

// [first | last | before RULE | after RULE]; `self` is the rule being changed, if any.
Expected<std::optional<Position>> parse_position(Cursor& c, const Store& store, std::string_view self) {
  using Where = Position::Where;
  if (c.accept("first")) return std::optional<Position>(Position{Where::first, {}});
  if (c.accept("last")) return std::optional<Position>(Position{Where::last, {}});
  Where where;
  if (c.accept("before"))
    where = Where::before;
  else if (c.accept("after"))
    where = Where::after;
  else
    return std::optional<Position>();
  const auto anchor = c.expect("a rule name");
  if (!anchor) return anchor.error();
  if (!store.find_rule(*anchor)) return at(*anchor, "no such rule");
  if (*anchor == self)
    return at(*anchor, cat("a rule cannot be placed ", where == Where::before ? "before" : "after", " itself"));
  return std::optional<Position>(Position{where, *anchor});
}

// "'<token>': <what> is used by <first>; change or delete that rule first", counting the others.
Error in_use(std::string_view token, std::string_view what, const std::string& first, std::size_t users) {
  if (users == 1) return at(token, cat(what, " is used by ", first, "; change or delete that rule first"));
  const std::string others = cat(std::to_string(users - 1), users == 2 ? " other rule" : " other rules");
  return at(token, cat(what, " is used by ", first, " and ", others, "; change or delete those rules first"));
}

// The rules that use a profile or a color map: the first, in rule order, with the role it has there
// ("rule r as its parent"), and how many. A scan, made only when the store says the name is in use.
struct Users {
  std::string first;
  std::size_t count = 0;
};

Users profile_users(const Store& store, std::string_view name) {
  Users users;
  store.each_rule([&](const Rule& rule) {
    std::string user;
    if (rule.profile == name)
      user = cat("rule ", rule.name);
    else if (rule.parent == name)
      user = cat("rule ", rule.name, " as its parent");
    else if (rule.cluster == name)
      user = cat("rule ", rule.name, " as its cluster");
    else
      return;
    if (users.count++ == 0) users.first = std::move(user);
  });
  return users;
}

Users color_map_users(const Store& store, std::string_view name) {
  Users users;
  store.each_rule([&](const Rule& rule) {
    if (rule.input != InputColor::mapped) return;
    std::string user;
    if (rule.pcp_map == name)
      user = cat("rule ", rule.name, " as its pcp-map");
    else if (rule.dscp_map == name)
      user = cat("rule ", rule.name, " as its dscp-map");
    else
      return;
    if (users.count++ == 0) users.first = std::move(user);
  });
  return users;
}

// color-map add|change NAME dscp|pcp COLOR VALUES [COLOR VALUES ...], after the name: values not
// listed are green; a value listed under two colors is an error.
Expected<ColorMap> parse_color_map(Cursor& c, const Store& store, std::string_view name, bool add) {
  ColorMap map;
  map.name = std::string(name);
  const auto kind = c.expect(kExpectColorMapKind);
  if (!kind) return kind.error();
  if (*kind == "dscp")
    map.kind = ColorMapKind::dscp;
  else if (*kind == "pcp")
    map.kind = ColorMapKind::pcp;
  else
    return not_a_keyword(*kind, cat("expected ", kExpectColorMapKind));
  if (!add) {
    // The rules that use the map need it of the kind they use it as.
    const ColorMap* existing = store.find_color_map(name);
    if (existing->kind != map.kind && store.color_map_used(name))
      return at(*kind, cat("color map ", name, " is used by ", color_map_users(store, name).first, ", which needs a ",
                           color_map_kind_name(existing->kind), " map; change or delete that rule first"));
  }
  const std::string_view expect_values = map.kind == ColorMapKind::dscp ? kExpectDscpValues : kExpectPcpValues;
  std::array<bool, 3> color_seen{};
  std::array<std::optional<std::size_t>, 64> listed{};  // the color each value was listed under
  if (c.done()) return missing_after(c.previous(), "a color (green, yellow or red) and its values");
  while (!c.done()) {
    const std::string_view key = c.take();
    const auto color = color_index(key);
    if (!color) return not_a_keyword(key, cat("expected ", kExpectColor));
    if (color_seen[*color]) return at(key, cat(key, " given twice"));
    color_seen[*color] = true;
    const auto token = c.expect(expect_values);
    if (!token) return token.error();
    const auto ranges = parse_color_map_values(*token, map.kind);
    if (!ranges) return ranges.error();
    for (const auto& [first, last] : *ranges) {
      if (first > last) {
        const auto a = std::to_string(first), b = std::to_string(last);
        return at(*token, cat("the range ", a, "-", b, " is reversed; write ", b, "-", a));
      }
      for (std::size_t value = first; value <= last; ++value) {
        if (listed[value] && *listed[value] != *color)
          return at(*token, cat(std::to_string(value), " is listed under both ", kColors[*listed[value]], " and ", key,
                                "; a value has one color"));
        listed[value] = *color;
        map.colors[value] = static_cast<Color>(*color);
      }
    }
  }
  return map;
}

// ---- commands ------------------------------------------------------------------------------------

// `KIND show NAME`: that one object's add command, as `KIND list` prints it.
template <class Find, class Format>
Expected<std::string> show_one(Cursor& c, Output output, std::string_view noun, Find find, Format format) {
  const auto name = c.expect(cat("a ", noun, " name"));
  if (!name) return name.error();
  const auto* found = find(*name);
  if (!found) return at(*name, cat("no such ", noun));
  if (auto error = c.expect_end()) return *error;
  return output == Output::produce ? format(*found).append("\n") : std::string();
}

Expected<std::string> color_map_command(Store& store, Cursor& c, Output output) {
  const auto verb = c.expect(kExpectVerb);
  if (!verb) return verb.error();

  if (*verb == "add" || *verb == "change") {
    const bool add = *verb == "add";
    const auto name = c.expect("a color map name");
    if (!name) return name.error();
    const bool exists = store.find_color_map(*name) != nullptr;
    if (add) {
      if (auto error = check_new_name(*name, "color map", exists)) return *error;
    } else if (!exists) {
      return at(*name, "no such color map");
    }
    auto map = parse_color_map(c, store, *name, add);
    if (!map) return map.error();
    if (add)
      store.add_color_map(std::move(*map));
    else
      store.change_color_map(std::move(*map));
    return std::string();
  }

  if (*verb == "delete") {
    const auto name = c.expect("a color map name");
    if (!name) return name.error();
    if (!store.find_color_map(*name)) return at(*name, "no such color map");
    if (auto error = c.expect_end()) return *error;
    if (store.color_map_used(*name)) {
      const Users users = color_map_users(store, *name);
      return in_use(*name, cat("color map ", *name), users.first, users.count);
    }
    store.delete_color_map(*name);
    return std::string();
  }

  if (*verb == "list") {
    if (auto error = c.expect_end()) return *error;
    std::string out;
    if (output == Output::produce)
      store.each_color_map([&](const ColorMap& m) { out.append(format_color_map(m)).append("\n"); });
    return out;
  }

  if (*verb == "show")
    return show_one(c, output, "color map", [&](std::string_view name) { return store.find_color_map(name); },
                    [](const auto& found) { return format_color_map(found); });

  return not_a_keyword(*verb, cat("expected ", kExpectVerb, " after 'color-map'"));
}

Expected<std::string> profile_command(Store& store, Cursor& c, Output output) {
  const auto verb = c.expect(kExpectVerb);
  if (!verb) return verb.error();

  if (*verb == "add" || *verb == "change") {
    const bool add = *verb == "add";
    const auto name = c.expect("a profile name");
    if (!name) return name.error();
    const bool exists = store.find_profile(*name) != nullptr;
    if (add) {
      if (auto error = check_new_name(*name, "profile", exists)) return *error;
    } else if (!exists) {
      return at(*name, "no such profile");
    }
    const auto algorithm = c.expect(kExpectAlgorithm);
    if (!algorithm) return algorithm.error();
    const auto spec = std::find_if(kAlgorithms.begin(), kAlgorithms.end(),
                                   [&](const AlgorithmSpec& s) { return s.name == *algorithm; });
    if (spec == kAlgorithms.end())
      return not_a_keyword(*algorithm, cat("expected ", kExpectAlgorithm));
    auto params = parse_params(c, *spec);
    if (!params) return params.error();
    if (add)
      store.add_profile(ProfileDef{std::string(*name), *params});
    else
      store.change_profile(*name, *params);
    return std::string();
  }

  if (*verb == "delete") {
    const auto name = c.expect("a profile name");
    if (!name) return name.error();
    if (!store.find_profile(*name)) return at(*name, "no such profile");
    if (auto error = c.expect_end()) return *error;
    // A rule uses a profile for its meters, as its parent or as its cluster.
    if (store.profile_used(*name)) {
      const Users users = profile_users(store, *name);
      return in_use(*name, cat("profile ", *name), users.first, users.count);
    }
    store.delete_profile(*name);
    return std::string();
  }

  if (*verb == "list") {
    if (auto error = c.expect_end()) return *error;
    std::string out;
    if (output == Output::produce)
      store.each_profile([&](const ProfileDef& p) { out.append(format_profile(p)).append("\n"); });
    return out;
  }

  if (*verb == "show")
    return show_one(c, output, "profile", [&](std::string_view name) { return store.find_profile(name); },
                    [](const auto& found) { return format_profile(found); });

  return not_a_keyword(*verb, cat("expected ", kExpectVerb, " after 'profile'"));
}

Expected<std::string> rule_command(Store& store, Cursor& c, Output output) {
  const auto verb = c.expect(kExpectVerb);
  if (!verb) return verb.error();

  if (*verb == "add" || *verb == "change") {
    const bool add = *verb == "add";
    const auto name = c.expect("a rule name");
    if (!name) return name.error();
    const bool exists = store.find_rule(*name) != nullptr;
    if (add) {
      if (auto error = check_new_name(*name, "rule", exists)) return *error;
    } else if (!exists) {
      return at(*name, "no such rule");
    }
    const auto position = parse_position(c, store, add ? std::string_view() : *name);
    if (!position) return position.error();
    auto rule = parse_rule_body(c, store, *name);
    if (!rule) return rule.error();
    // Everything is checked: from here on nothing fails.
    if (add)
      store.add_rule(std::move(*rule), position->value_or(Position{Position::Where::last, {}}));
    else
      store.change_rule(std::move(*rule), *position);
    return std::string();
  }

  if (*verb == "delete") {
    const auto name = c.expect("a rule name");
    if (!name) return name.error();
    if (!store.find_rule(*name)) return at(*name, "no such rule");
    if (auto error = c.expect_end()) return *error;
    store.delete_rule(*name);
    return std::string();
  }

  if (*verb == "list") {
    if (auto error = c.expect_end()) return *error;
    std::string out;
    if (output == Output::produce) store.each_rule([&](const Rule& r) { out.append(format_rule(r)).append("\n"); });
    return out;
  }

  if (*verb == "show")
    return show_one(c, output, "rule", [&](std::string_view name) { return store.find_rule(name); },
                    [](const auto& found) { return format_rule(found); });

  return not_a_keyword(*verb, cat("expected ", kExpectVerb, " after 'rule'"));
}

Expected<std::string> default_command(Store& store, Cursor& c) {
  const auto action = parse_action(c);
  if (!action) return action.error();
  if (action->shape_max_delay_ns) return at("shape", "the default action cannot shape: only a rule's red packets are shaped");
  if (auto error = c.expect_end()) return *error;
  store.set_default_action(*action);
  return std::string();
}

// The whole policy as commands, as print() (language.hpp) writes it.
std::string show(const Store& store) {
  std::string out;
  store.each_profile([&](const ProfileDef& p) { out.append(format_profile(p)).append("\n"); });
  store.each_color_map([&](const ColorMap& m) { out.append(format_color_map(m)).append("\n"); });
  store.each_rule([&](const Rule& r) { out.append(format_rule(r)).append("\n"); });
  if (store.default_action() != dataplane::Action{})
    out.append("default ").append(format_action(store.default_action())).append("\n");
  return out;
}

}  // namespace

Expected<std::string> run_command(Store& store, std::string_view line, Output output) {
  const auto tokens = tokenize(line);
  if (tokens.empty()) return std::string();
  Cursor c(tokens);
  const std::string_view command = c.take();
  if (command == "profile") return profile_command(store, c, output);
  if (command == "color-map") return color_map_command(store, c, output);
  if (command == "rule") return rule_command(store, c, output);
  if (command == "default") return default_command(store, c);
  if (command == "show") {
    if (auto error = c.expect_end()) return *error;
    return output == Output::produce ? show(store) : std::string();
  }
  return not_a_keyword(command, cat("unknown command; expected ", kExpectCommand));
}

}  // namespace tricolor::control::detail
