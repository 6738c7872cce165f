#pragma once
// The vocabulary of the command language (keywords, names of values, parameters, algorithms, what each
// value is for "expected ..." messages) and the helpers every part uses to build its errors. Internal
// to control/.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"
#include "policer/profile.hpp"
#include "policer/quote.hpp"

namespace tricolor::control::detail {

// ---- errors --------------------------------------------------------------------------------------

// Concatenation by appending: GCC 12 warns falsely (-Wrestrict) on "'" + std::string(...).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  (s.append(std::string_view(parts)), ...);
  return s;
}

// Every token a message repeats is quote()d (policer/quote.hpp): short, printable, escaped. Names the
// language has accepted (letters, digits, '_', '.', '-', at most 64) and keywords are printed as they
// are. The subject stays the token as given.

// An error at a token: "'<token>': <what>".
inline Error at(std::string_view token, std::string_view what) {
  return Error{std::string(token), cat(quote(token), ": ", what)};
}

// An error at the end of the line: the token that should have followed `previous` is missing.
inline Error missing_after(std::string_view previous, std::string_view what) {
  return Error{"", cat("after ", quote(previous), ": expected ", what)};
}

// Words with a role in the grammar; see language_internal.hpp.
bool is_keyword(std::string_view word);

inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Keywords are lower-case; a token that is one only in another case earns a hint.
inline std::string_view case_hint(std::string_view token) {
  std::string lowered(token);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), lower);
  if (lowered != token && is_keyword(lowered)) return " (keywords are lower-case)";
  return "";
}

// An unexpected word where a keyword was expected.
inline Error not_a_keyword(std::string_view token, std::string_view what) {
  return at(token, cat(what, case_hint(token)));
}

// ---- numbers and lists ---------------------------------------------------------------------------

// Digits only (leading zeros allowed), at most `max`.
inline std::optional<std::uint64_t> parse_number(std::string_view text, std::uint64_t max) {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
    if (value > max) return std::nullopt;  // max is small: value * 10 + 9 cannot overflow first
  }
  return value;
}

// Calls visit(item) for each `separator`-separated item of `text` (an empty text is one empty item),
// until visit returns false; false if it did. Items are views into `text`: no list of them is built.
template <class Visit>
bool for_each_item(std::string_view text, char separator, Visit visit) {
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(separator, start);
    if (!visit(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)))
      return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

// ---- vocabulary ----------------------------------------------------------------------------------

// clang-format off
inline constexpr std::array<std::string_view, 82> kKeywords{
    "profile", "rule",   "add",   "change", "delete", "list",    "show",      "default",
    "first",   "last",   "before", "after", "port",   "vlan",    "src",       "dst",
    "proto",   "sport",  "dport", "dscp",   "input",  "length",  "blind",     "green",
    "yellow",  "red",    "forward", "drop", "remark", "pcp",     "cir",       "cbs",
    "eir",     "ebs",    "pir",   "pbs",    "1r2c",   "srtcm",   "trtcm",     "trtcm4115",
    "tcp",     "udp",    "sctp",  "icmp",   "icmpv6", "l1",      "l2",        "l3",
    "color-map", "per",  "src+dport", "5-tuple", "timeout", "capacity", "fallback", "aggregate",
    "parent",  "map",    "pcp-map", "dscp-map", "unmapped", "cluster",
    // the limiters (issue 13) and their parameters
    "fixed-window", "sliding-window", "gcra", "smooth", "warmup", "rate", "limit", "window",
    "buckets", "tolerance", "max-burst", "period", "cold-factor",
    // shaping (issue 27)
    "shape", "max-delay", "queue",
    // concurrent flows per key (issue 27)
    "max-flows", "flow-timeout", "flow-capacity", "flow-excess",
};
// clang-format on

struct NamedValue {
  std::string_view name;
  std::uint8_t value;
};

// The first name of a value is the one printed.
// clang-format off
inline constexpr std::array<NamedValue, 24> kDscpNames{{
    {"be", 0},    {"df", 0},    {"cs0", 0},   {"cs1", 8},   {"cs2", 16},  {"cs3", 24},
    {"cs4", 32},  {"cs5", 40},  {"cs6", 48},  {"cs7", 56},  {"af11", 10}, {"af12", 12},
    {"af13", 14}, {"af21", 18}, {"af22", 20}, {"af23", 22}, {"af31", 26}, {"af32", 28},
    {"af33", 30}, {"af41", 34}, {"af42", 36}, {"af43", 38}, {"ef", 46},   {"va", 44},  // va: RFC 5865
}};
// clang-format on

inline constexpr std::array<NamedValue, 5> kProtocols{{
    {"tcp", 6},
    {"udp", 17},
    {"sctp", 132},
    {"icmp", 1},
    {"icmpv6", 58},
}};

inline bool carries_ports(std::uint8_t protocol) { return protocol == 6 || protocol == 17 || protocol == 132; }

// What a parameter's value is, which says how it is parsed and printed and whether it sets the unit.
enum class ParamKind : std::uint8_t {
  rate,      // a rate such as 10mbit or 5kpps (policer::parse_rate): sets the unit
  burst,     // a burst such as 64k or 100pkt (policer::parse_burst): sets the unit
  duration,  // a duration such as 10ms (kDurationScales), in nanoseconds
  count,     // a plain whole number, no unit
};

// Params keeps most values in 64 bits and the two counts in 32 (its size is part of Profile's cache
// layout): a parameter is read and written through these, so every kind is handled alike. The
// language passes on a count only once it fits 32 bits.
template <auto Field>
std::uint64_t get_param(const policer::Params& p) {
  return p.*Field;
}
template <auto Field>
void set_param(policer::Params& p, std::uint64_t value) {
  using T = std::remove_reference_t<decltype(p.*Field)>;
  p.*Field = static_cast<T>(value);
}

struct ParamSpec {
  std::string_view name;
  ParamKind kind;
  std::uint64_t (*get)(const policer::Params&);
  void (*set)(policer::Params&, std::uint64_t);
  std::uint64_t when_not_given = 0;  // the value a missing parameter has (0: none, validate() says if needed)
};
template <auto Field>
constexpr ParamSpec param(std::string_view name, ParamKind kind, std::uint64_t when_not_given = 0) {
  return ParamSpec{name, kind, &get_param<Field>, &set_param<Field>, when_not_given};
}

// Warm-up's cold factor when the command does not give one: Guava's and Sentinel's default.
inline constexpr std::uint64_t kDefaultColdFactor = 3;

using policer::Params;
inline constexpr std::array<ParamSpec, 14> kParams{{
    param<&Params::cir>("cir", ParamKind::rate),
    param<&Params::cbs>("cbs", ParamKind::burst),
    param<&Params::eir>("eir", ParamKind::rate),
    param<&Params::ebs>("ebs", ParamKind::burst),
    param<&Params::pir>("pir", ParamKind::rate),
    param<&Params::pbs>("pbs", ParamKind::burst),
    param<&Params::rate>("rate", ParamKind::rate),
    param<&Params::limit>("limit", ParamKind::burst),
    param<&Params::window>("window", ParamKind::duration),
    param<&Params::buckets>("buckets", ParamKind::count),
    param<&Params::tolerance>("tolerance", ParamKind::duration),
    param<&Params::max_burst>("max-burst", ParamKind::burst),
    param<&Params::period>("period", ParamKind::duration),
    param<&Params::cold_factor>("cold-factor", ParamKind::count, kDefaultColdFactor),
}};

inline std::optional<std::size_t> param_index(std::string_view name) {
  for (std::size_t i = 0; i < kParams.size(); ++i)
    if (kParams[i].name == name) return i;
  return std::nullopt;
}

// How a missing parameter is shown in "missing 'window DURATION'", and what its value should be.
inline std::string_view placeholder(ParamKind kind) {
  switch (kind) {
    case ParamKind::rate: return "RATE";
    case ParamKind::burst: return "BURST";
    case ParamKind::duration: return "DURATION";
    case ParamKind::count: return "COUNT";
  }
  return "VALUE";
}

// ---- commands ------------------------------------------------------------------------------------

// The language's commands, and the verbs of each object command (profile, color-map, rule): one list
// for the language, the shell's completion and the test that checks them against the README.
inline constexpr std::array<std::string_view, 5> kLanguageCommands{"profile", "color-map", "rule", "default", "show"};
inline constexpr std::array<std::string_view, 3> kObjectCommands{"profile", "color-map", "rule"};
inline constexpr std::array<std::string_view, 5> kObjectVerbs{"add", "change", "delete", "list", "show"};
inline constexpr std::string_view kExpectVerb = "add, change, delete, list or show";
inline constexpr std::string_view kExpectCommand = "profile, color-map, rule, default or show";

struct AlgorithmSpec {
  std::string_view name;
  policer::Algorithm algorithm;
  std::string_view takes;                  // for messages
  std::array<std::string_view, 4> params;  // the parameters it takes, in printed order; "" unused
};
inline constexpr std::array<AlgorithmSpec, 9> kAlgorithms{{
    {"1r2c", policer::Algorithm::one_rate_two_color, "cir, cbs", {"cir", "cbs", "", ""}},
    {"srtcm", policer::Algorithm::srtcm, "cir, cbs, ebs", {"cir", "cbs", "ebs", ""}},
    {"trtcm", policer::Algorithm::trtcm, "cir, cbs, pir, pbs", {"cir", "cbs", "pir", "pbs"}},
    {"trtcm4115", policer::Algorithm::trtcm_4115, "cir, cbs, eir, ebs", {"cir", "cbs", "eir", "ebs"}},
    {"fixed-window", policer::Algorithm::fixed_window, "limit, window", {"limit", "window", "", ""}},
    {"sliding-window", policer::Algorithm::sliding_window, "limit, window, buckets", {"limit", "window", "buckets", ""}},
    {"gcra", policer::Algorithm::gcra, "rate, tolerance", {"rate", "tolerance", "", ""}},
    {"smooth", policer::Algorithm::smooth, "rate, max-burst", {"rate", "max-burst", "", ""}},
    {"warmup", policer::Algorithm::warmup, "rate, period, cold-factor", {"rate", "period", "cold-factor", ""}},
}};
inline constexpr std::string_view kExpectAlgorithm =
    "an algorithm: 1r2c, srtcm, trtcm, trtcm4115, fixed-window, sliding-window, gcra, smooth or warmup";

inline const AlgorithmSpec& algorithm_spec(policer::Algorithm algorithm) {
  for (const auto& spec : kAlgorithms)
    if (spec.algorithm == algorithm) return spec;
  return kAlgorithms[0];
}

inline bool takes(const AlgorithmSpec& spec, std::string_view param) {
  return std::find(spec.params.begin(), spec.params.end(), param) != spec.params.end();
}

inline constexpr std::array<std::string_view, 3> kColors{"green", "yellow", "red"};

inline std::optional<std::size_t> color_index(std::string_view word) {
  for (std::size_t i = 0; i < kColors.size(); ++i)
    if (kColors[i] == word) return i;
  return std::nullopt;
}

inline std::string_view color_name(policer::Color color) { return kColors[static_cast<std::size_t>(color)]; }

struct KeyKindName {
  std::string_view name;
  dataplane::KeyKind kind;
};
inline constexpr std::array<KeyKindName, 4> kKeyKinds{{
    {"src", dataplane::KeyKind::src},
    {"dst", dataplane::KeyKind::dst},
    {"src+dport", dataplane::KeyKind::src_dport},
    {"5-tuple", dataplane::KeyKind::five_tuple},
}};

struct FallbackName {
  std::string_view name;
  dataplane::KeyFallback fallback;
};
inline constexpr std::array<FallbackName, 3> kFallbacks{{
    {"aggregate", dataplane::KeyFallback::aggregate},
    {"default", dataplane::KeyFallback::default_action},
    {"drop", dataplane::KeyFallback::drop},
}};

inline std::string_view color_map_kind_name(dataplane::ColorMapKind kind) {
  return kind == dataplane::ColorMapKind::dscp ? "dscp" : "pcp";
}

// How many entries of a color map are used: 64 DSCP values or 8 PCP values.
inline std::size_t color_map_size(dataplane::ColorMapKind kind) {
  return kind == dataplane::ColorMapKind::dscp ? 64 : 8;
}

// A number with a unit suffix, such as 30s or 64k.
struct Scale {
  std::string_view suffix;
  std::uint64_t factor;
};
// clang-format off
inline constexpr std::array<Scale, 6> kDurationScales{{
    {"h", 3'600'000'000'000}, {"m", 60'000'000'000}, {"s", 1'000'000'000},
    {"ms", 1'000'000},        {"us", 1'000},         {"ns", 1},
}};
inline constexpr std::array<Scale, 3> kCapacityScales{{{"m", 1u << 20}, {"k", 1u << 10}, {"", 1}}};
// clang-format on

inline constexpr std::uint64_t kMinTimeoutNs = 1'000'000;               // 1ms
inline constexpr std::uint64_t kMinShapeDelayNs = 1'000;                // 1us (at most kMaxShapeDelayNs, 1s)
inline constexpr std::uint64_t kMaxTimeoutNs = 24 * 3'600'000'000'000;  // 24h
inline constexpr std::uint64_t kMaxCapacity = 1u << 28;
inline constexpr std::int32_t kMaxLengthAdjust = 100'000;

// What each value is, for "expected ..." messages.
inline constexpr std::string_view kExpectPorts = "port numbers 0-65535 separated by commas, such as 0 or 0,1";
inline constexpr std::string_view kExpectVlan = "a VLAN id 0-4095";
inline constexpr std::string_view kExpectPrefix = "an IPv4 or IPv6 prefix such as 10.1.0.0/16 or 2001:db8::/32";
inline constexpr std::string_view kExpectProtocol = "a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255";
inline constexpr std::string_view kExpectL4Ports =
    "ports N or ranges N-M (0-65535) separated by commas, such as 80,443 or 1024-65535";
inline constexpr std::string_view kExpectDscp =
    "DSCP values 0-63 or names (be, df, cs0-cs7, af11-af43, ef, va) separated by commas";
inline constexpr std::string_view kExpectOneDscp = "a DSCP 0-63 or a name: be, df, cs0-cs7, af11-af43, ef, va";
inline constexpr std::string_view kExpectInput = "an input color source: blind, dscp or map";
inline constexpr std::string_view kExpectLength =
    "a metered length l1, l2 or l3, optionally adjusted such as l2+4 or l3-20 (-100000..100000)";
inline constexpr std::string_view kExpectPcp = "a PCP 0-7";
inline constexpr std::string_view kExpectAction = "an action: forward, drop, remark DSCP or pcp N";
inline constexpr std::string_view kExpectShapeDelay = "a maximum delay such as 5ms or 200us (1us to 1s)";
inline constexpr std::string_view kExpectShapeQueue =
    "a number of packets held at once such as 64, 4k or 1m (1 to 1m, k = 1024, m = 1048576)";
inline constexpr std::string_view kExpectClause =
    "expected a match (port, vlan, src, dst, proto, sport, dport, dscp), profile, per, timeout, capacity, "
    "fallback, max-flows, flow-timeout, flow-capacity, flow-excess, parent, cluster, input, length or a color and its action (green, yellow, red or a pair IN>OUT such as "
    "green>yellow)";
inline constexpr std::string_view kExpectPerKey =
    "a key: src, dst, src+dport or 5-tuple, optionally with address masks such as src/24 or src/24,64";
inline constexpr std::string_view kExpectDuration =
    "a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)";
inline constexpr std::string_view kExpectCount = "a whole number such as 8 (no unit)";
inline constexpr std::string_view kExpectCapacity =
    "a number of keys such as 4096, 64k or 1m (k = 1024, m = 1048576)";
inline constexpr std::string_view kExpectMaxFlows = "a number of flows per key, 1 to 16777216";
inline constexpr std::string_view kExpectFlowCapacity =
    "a number of flows per worker such as 4096, 64k or 1m (1 to 16m)";
inline constexpr std::string_view kExpectFallback = "a fallback: aggregate, default or drop";
inline constexpr std::string_view kExpectColor = "a color: green, yellow or red";
inline constexpr std::string_view kExpectColorMapKind = "a color map kind: dscp or pcp";
inline constexpr std::string_view kExpectDscpValues =
    "DSCP values 0-63, ranges N-M or names (be, df, cs0-cs7, af11-af43, ef, va) separated by commas";
inline constexpr std::string_view kExpectPcpValues = "PCP values 0-7 or ranges N-M separated by commas";
inline constexpr std::string_view kNameRule = "a letter, then up to 63 letters, digits, '_', '.' or '-'";

}  // namespace tricolor::control::detail
