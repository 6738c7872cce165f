#include "control/language.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/language_internal.hpp"
#include "policer/units.hpp"

namespace tricolor::control {

using dataplane::Action;
using dataplane::ColorMap;
using dataplane::ColorMapKind;
using dataplane::InputColor;
using dataplane::KeyFallback;
using dataplane::KeyKind;
using dataplane::LengthBase;
using dataplane::PerKey;
using dataplane::PortRange;
using dataplane::Prefix;
using dataplane::ProfileDef;
using dataplane::Rule;
using policer::Algorithm;
using policer::Color;
using policer::Params;
using policer::Unit;

namespace {

// ---- small helpers -------------------------------------------------------------------------------

// Concatenation by appending: GCC 12 warns falsely (-Wrestrict) on "'" + std::string(...).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  (s.append(std::string_view(parts)), ...);
  return s;
}

// An error at a token: "'<token>': <what>".
Error at(std::string_view token, std::string_view what) {
  return Error{std::string(token), cat("'", token, "': ", what)};
}

// An error at the end of the line: the token that should have followed `previous` is missing.
Error missing_after(std::string_view previous, std::string_view what) {
  return Error{"", cat("after '", previous, "': expected ", what)};
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Keywords are lower-case; a token that is one only in another case earns a hint.
std::string case_hint(std::string_view token) {
  std::string lowered;
  std::transform(token.begin(), token.end(), std::back_inserter(lowered), lower);
  if (lowered != token && detail::is_keyword(lowered)) return " (keywords are lower-case)";
  return "";
}

// An unexpected word where a keyword was expected.
Error not_a_keyword(std::string_view token, std::string_view what) { return at(token, cat(what, case_hint(token))); }

// Digits only (leading zeros allowed), at most `max`.
std::optional<std::uint64_t> parse_number(std::string_view text, std::uint64_t max) {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
    if (value > max) return std::nullopt;  // max is small: value * 10 + 9 cannot overflow first
  }
  return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    if (end == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

// ---- vocabulary ----------------------------------------------------------------------------------

// clang-format off
constexpr std::array<std::string_view, 61> kKeywords{
    "profile", "rule",   "add",   "change", "delete", "list",    "show",      "default",
    "first",   "last",   "before", "after", "port",   "vlan",    "src",       "dst",
    "proto",   "sport",  "dport", "dscp",   "input",  "length",  "blind",     "green",
    "yellow",  "red",    "forward", "drop", "remark", "pcp",     "cir",       "cbs",
    "eir",     "ebs",    "pir",   "pbs",    "1r2c",   "srtcm",   "trtcm",     "trtcm4115",
    "tcp",     "udp",    "sctp",  "icmp",   "icmpv6", "l1",      "l2",        "l3",
    "color-map", "per",  "src+dport", "5-tuple", "timeout", "capacity", "fallback", "aggregate",
    "parent",  "map",    "pcp-map", "dscp-map", "unmapped",
};
// clang-format on

struct NamedValue {
  std::string_view name;
  std::uint8_t value;
};

// The first name of a value is the one printed.
// clang-format off
constexpr std::array<NamedValue, 24> kDscpNames{{
    {"be", 0},    {"df", 0},    {"cs0", 0},   {"cs1", 8},   {"cs2", 16},  {"cs3", 24},
    {"cs4", 32},  {"cs5", 40},  {"cs6", 48},  {"cs7", 56},  {"af11", 10}, {"af12", 12},
    {"af13", 14}, {"af21", 18}, {"af22", 20}, {"af23", 22}, {"af31", 26}, {"af32", 28},
    {"af33", 30}, {"af41", 34}, {"af42", 36}, {"af43", 38}, {"ef", 46},   {"va", 44},  // va: RFC 5865
}};
// clang-format on

constexpr std::array<NamedValue, 5> kProtocols{{
    {"tcp", 6},
    {"udp", 17},
    {"sctp", 132},
    {"icmp", 1},
    {"icmpv6", 58},
}};

bool carries_ports(std::uint8_t protocol) { return protocol == 6 || protocol == 17 || protocol == 132; }

struct ParamSpec {
  std::string_view name;
  bool rate;  // a rate (parse_rate) or a burst (parse_burst)
  std::uint64_t Params::*field;
};
constexpr std::array<ParamSpec, 6> kParams{{
    {"cir", true, &Params::cir},
    {"cbs", false, &Params::cbs},
    {"eir", true, &Params::eir},
    {"ebs", false, &Params::ebs},
    {"pir", true, &Params::pir},
    {"pbs", false, &Params::pbs},
}};

std::optional<std::size_t> param_index(std::string_view name) {
  for (std::size_t i = 0; i < kParams.size(); ++i)
    if (kParams[i].name == name) return i;
  return std::nullopt;
}

struct AlgorithmSpec {
  std::string_view name;
  Algorithm algorithm;
  std::string_view takes;                  // for messages
  std::array<std::string_view, 4> params;  // the parameters it takes, in printed order; "" unused
};
constexpr std::array<AlgorithmSpec, 4> kAlgorithms{{
    {"1r2c", Algorithm::one_rate_two_color, "cir, cbs", {"cir", "cbs", "", ""}},
    {"srtcm", Algorithm::srtcm, "cir, cbs, ebs", {"cir", "cbs", "ebs", ""}},
    {"trtcm", Algorithm::trtcm, "cir, cbs, pir, pbs", {"cir", "cbs", "pir", "pbs"}},
    {"trtcm4115", Algorithm::trtcm_4115, "cir, cbs, eir, ebs", {"cir", "cbs", "eir", "ebs"}},
}};

const AlgorithmSpec& algorithm_spec(Algorithm algorithm) {
  for (const auto& spec : kAlgorithms)
    if (spec.algorithm == algorithm) return spec;
  return kAlgorithms[0];
}

bool takes(const AlgorithmSpec& spec, std::string_view param) {
  return std::find(spec.params.begin(), spec.params.end(), param) != spec.params.end();
}

constexpr std::array<std::string_view, 3> kColors{"green", "yellow", "red"};

std::optional<std::size_t> color_index(std::string_view word) {
  for (std::size_t i = 0; i < kColors.size(); ++i)
    if (kColors[i] == word) return i;
  return std::nullopt;
}

std::string_view color_name(Color color) { return kColors[static_cast<std::size_t>(color)]; }

struct KeyKindName {
  std::string_view name;
  KeyKind kind;
};
constexpr std::array<KeyKindName, 4> kKeyKinds{{
    {"src", KeyKind::src},
    {"dst", KeyKind::dst},
    {"src+dport", KeyKind::src_dport},
    {"5-tuple", KeyKind::five_tuple},
}};

struct FallbackName {
  std::string_view name;
  KeyFallback fallback;
};
constexpr std::array<FallbackName, 3> kFallbacks{{
    {"aggregate", KeyFallback::aggregate},
    {"default", KeyFallback::default_action},
    {"drop", KeyFallback::drop},
}};

std::string_view color_map_kind_name(ColorMapKind kind) { return kind == ColorMapKind::dscp ? "dscp" : "pcp"; }

// How many entries of a color map are used: 64 DSCP values or 8 PCP values.
std::size_t color_map_size(ColorMapKind kind) { return kind == ColorMapKind::dscp ? 64 : 8; }

// A number with a unit suffix, such as 30s or 64k.
struct Scale {
  std::string_view suffix;
  std::uint64_t factor;
};
// clang-format off
constexpr std::array<Scale, 6> kDurationScales{{
    {"h", 3'600'000'000'000}, {"m", 60'000'000'000}, {"s", 1'000'000'000},
    {"ms", 1'000'000},        {"us", 1'000},         {"ns", 1},
}};
constexpr std::array<Scale, 3> kCapacityScales{{{"m", 1u << 20}, {"k", 1u << 10}, {"", 1}}};
// clang-format on

constexpr std::uint64_t kMinTimeoutNs = 1'000'000;               // 1ms
constexpr std::uint64_t kMaxTimeoutNs = 24 * 3'600'000'000'000;  // 24h
constexpr std::uint64_t kMaxCapacity = 1u << 28;

// What each value is, for "expected ..." messages.
constexpr std::string_view kExpectPorts = "port numbers 0-65535 separated by commas, such as 0 or 0,1";
constexpr std::string_view kExpectVlan = "a VLAN id 0-4095";
constexpr std::string_view kExpectPrefix = "an IPv4 or IPv6 prefix such as 10.1.0.0/16 or 2001:db8::/32";
constexpr std::string_view kExpectProtocol = "a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255";
constexpr std::string_view kExpectL4Ports =
    "ports N or ranges N-M (0-65535) separated by commas, such as 80,443 or 1024-65535";
constexpr std::string_view kExpectDscp =
    "DSCP values 0-63 or names (be, df, cs0-cs7, af11-af43, ef, va) separated by commas";
constexpr std::string_view kExpectOneDscp = "a DSCP 0-63 or a name: be, df, cs0-cs7, af11-af43, ef, va";
constexpr std::string_view kExpectInput = "an input color source: blind, dscp or map";
constexpr std::string_view kExpectLength =
    "a metered length l1, l2 or l3, optionally adjusted such as l2+4 or l3-20 (-100000..100000)";
constexpr std::string_view kExpectPcp = "a PCP 0-7";
constexpr std::string_view kExpectAction = "an action: forward, drop, remark DSCP or pcp N";
constexpr std::string_view kExpectClause =
    "expected a match (port, vlan, src, dst, proto, sport, dport, dscp), profile, per, timeout, capacity, "
    "fallback, parent, input, length or a color and its action (green, yellow, red or a pair IN>OUT such as "
    "green>yellow)";
constexpr std::string_view kExpectPerKey =
    "a key: src, dst, src+dport or 5-tuple, optionally with address masks such as src/24 or src/24,64";
constexpr std::string_view kExpectDuration = "a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)";
constexpr std::string_view kExpectCapacity = "a number of keys such as 4096, 64k or 1m (k = 1024, m = 1048576)";
constexpr std::string_view kExpectFallback = "a fallback: aggregate, default or drop";
constexpr std::string_view kExpectColor = "a color: green, yellow or red";
constexpr std::string_view kExpectColorMapKind = "a color map kind: dscp or pcp";
constexpr std::string_view kExpectDscpValues =
    "DSCP values 0-63, ranges N-M or names (be, df, cs0-cs7, af11-af43, ef, va) separated by commas";
constexpr std::string_view kExpectPcpValues = "PCP values 0-7 or ranges N-M separated by commas";
constexpr std::string_view kNameRule = "a letter, then up to 63 letters, digits, '_', '.' or '-'";

constexpr std::int32_t kMaxLengthAdjust = 100'000;

// ---- tokens --------------------------------------------------------------------------------------

class Cursor {
 public:
  explicit Cursor(const std::vector<detail::Token>& tokens) : tokens_(tokens) {}

  bool done() const { return next_ == tokens_.size(); }
  std::string_view peek() const { return done() ? std::string_view() : tokens_[next_].text; }
  std::string_view take() { return tokens_[next_++].text; }
  std::string_view previous() const { return next_ == 0 ? std::string_view() : tokens_[next_ - 1].text; }

  // The next token, or an error saying what should have followed the previous one.
  Expected<std::string_view> expect(std::string_view what) {
    if (done()) return missing_after(previous(), what);
    return take();
  }

  // Takes the next token when it is `keyword`.
  bool accept(std::string_view keyword) {
    if (done() || tokens_[next_].text != keyword) return false;
    ++next_;
    return true;
  }

  // An error when anything follows the end of the command.
  std::optional<Error> expect_end() const {
    if (done()) return std::nullopt;
    return at(peek(), cat("unexpected after '", previous(), "': the command ends there"));
  }

 private:
  const std::vector<detail::Token>& tokens_;
  std::size_t next_ = 0;
};

// ---- values --------------------------------------------------------------------------------------

std::optional<std::uint8_t> dscp_value(std::string_view word) {
  if (auto number = parse_number(word, 63)) return static_cast<std::uint8_t>(*number);
  for (const auto& named : kDscpNames)
    if (named.name == word) return named.value;
  return std::nullopt;
}

Expected<std::uint8_t> parse_one_dscp(std::string_view token) {
  if (auto value = dscp_value(token)) return *value;
  return not_a_keyword(token, cat("expected ", kExpectOneDscp));
}

Expected<std::uint8_t> parse_pcp(std::string_view token) {
  if (auto value = parse_number(token, 7)) return static_cast<std::uint8_t>(*value);
  return at(token, cat("expected ", kExpectPcp));
}

// A comma-separated list whose items `parse_item` reads; `what` describes the whole list.
template <class T, class ParseItem>
Expected<std::vector<T>> parse_list(std::string_view token, std::string_view what, ParseItem parse_item) {
  std::vector<T> values;
  for (const std::string_view item : split(token, ',')) {
    std::optional<T> value = parse_item(item);
    if (!value) {
      if (item == token) return not_a_keyword(token, cat("expected ", what));
      if (item.empty()) return at(token, cat("empty item in the list; expected ", what));
      return at(token, cat("'", item, "' is not a valid item; expected ", what));
    }
    values.push_back(*value);
  }
  return values;
}

std::optional<PortRange> port_range(std::string_view item) {
  const std::size_t dash = item.find('-');
  const auto first = parse_number(item.substr(0, dash), 65535);
  if (!first) return std::nullopt;
  if (dash == std::string_view::npos) {
    const auto port = static_cast<std::uint16_t>(*first);
    return PortRange{port, port};
  }
  const auto last = parse_number(item.substr(dash + 1), 65535);
  if (!last) return std::nullopt;
  return PortRange{static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last)};
}

Expected<std::vector<PortRange>> parse_l4_ports(std::string_view token) {
  auto ranges = parse_list<PortRange>(token, kExpectL4Ports, port_range);
  if (!ranges) return ranges;
  for (const PortRange& range : *ranges) {
    if (range.first > range.last) {
      const auto first = std::to_string(range.first), last = std::to_string(range.last);
      return at(token, cat("the range ", first, "-", last, " is reversed; write ", last, "-", first));
    }
  }
  return ranges;
}

Expected<std::uint8_t> parse_protocol(std::string_view token) {
  for (const auto& named : kProtocols)
    if (named.name == token) return named.value;
  if (auto number = parse_number(token, 255)) return static_cast<std::uint8_t>(*number);
  return not_a_keyword(token, cat("expected ", kExpectProtocol));
}

Expected<dataplane::MeteredLength> parse_length(std::string_view token) {
  dataplane::MeteredLength length;
  const std::string_view base = token.substr(0, 2);
  if (base == "l1") {
    length.base = LengthBase::l1;
  } else if (base == "l2") {
    length.base = LengthBase::l2;
  } else if (base == "l3") {
    length.base = LengthBase::l3;
  } else {
    return not_a_keyword(token, cat("expected ", kExpectLength));
  }
  const std::string_view adjust = token.substr(2);
  if (adjust.empty()) return length;
  if (adjust[0] != '+' && adjust[0] != '-') return at(token, cat("expected ", kExpectLength));
  const auto amount = parse_number(adjust.substr(1), 1'000'000'000);
  if (!amount) return at(token, cat("expected ", kExpectLength));
  if (*amount > static_cast<std::uint64_t>(kMaxLengthAdjust))
    return at(token, "the adjustment must be -100000..100000 bytes");
  length.adjust = static_cast<std::int32_t>(*amount) * (adjust[0] == '-' ? -1 : 1);
  return length;
}

// A decimal number and one of `scales`' suffixes (in any case), exactly: "1.5k" is 1536, "0.5s" is
// 500000000 (ns). nullopt when the form is wrong.
struct Scaled {
  std::uint64_t value = 0;  // saturates at UINT64_MAX
  bool not_whole = false;   // a fraction that does not come to a whole number
};
template <std::size_t N>
std::optional<Scaled> parse_scaled(std::string_view text, const std::array<Scale, N>& scales) {
  constexpr unsigned __int128 kLimit = static_cast<unsigned __int128>(1) << 64;
  unsigned __int128 mantissa = 0, divisor = 1;
  bool digits = false, point = false, huge_whole = false, huge_fraction = false;
  std::size_t end = 0;
  while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || (text[end] == '.' && !point))) {
    if (text[end] == '.') point = true;
    ++end;
  }
  std::string_view number = text.substr(0, end);
  if (point) {
    while (number.back() == '0') number.remove_suffix(1);  // trailing zeros of a fraction change nothing
    if (number.back() == '.') number.remove_suffix(1);
  }
  const std::size_t dot = number.find('.');
  for (std::size_t i = 0; i < number.size(); ++i) {
    if (i == dot) continue;
    digits = true;
    const bool fraction = dot != std::string_view::npos && i > dot;
    if (mantissa >= kLimit || divisor >= kLimit) {
      // Far more digits than a valid value has: too large, or too precise to come to a whole number.
      (fraction ? huge_fraction : huge_whole) = true;
      continue;
    }
    mantissa = mantissa * 10 + static_cast<unsigned>(number[i] - '0');
    if (fraction) divisor *= 10;
  }
  if (!digits || text[end - 1] == '.') return std::nullopt;
  const std::string_view suffix = text.substr(end);
  for (const Scale& scale : scales) {
    if (suffix.size() != scale.suffix.size() ||
        !std::equal(suffix.begin(), suffix.end(), scale.suffix.begin(), [](char a, char b) { return lower(a) == b; }))
      continue;
    Scaled result;
    if (huge_whole) {
      result.value = UINT64_MAX;
      return result;
    }
    if (huge_fraction) {
      result.not_whole = true;
      return result;
    }
    const unsigned __int128 scaled = mantissa * scale.factor;  // below 2^68 * 2^42
    result.not_whole = scaled % divisor != 0;
    const unsigned __int128 whole = scaled / divisor;
    result.value = whole > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(whole);
    return result;
  }
  return std::nullopt;
}

// per src|dst|src+dport|5-tuple[/V4[,V6]]
Expected<PerKey> parse_per_key(std::string_view token) {
  PerKey per_key;
  const std::size_t slash = token.find('/');
  const std::string_view kind = token.substr(0, slash);
  const auto it =
      std::find_if(kKeyKinds.begin(), kKeyKinds.end(), [&](const KeyKindName& k) { return k.name == kind; });
  if (it == kKeyKinds.end()) return not_a_keyword(token, cat("expected ", kExpectPerKey));
  per_key.kind = it->kind;
  if (slash == std::string_view::npos) return per_key;
  const auto masks = split(token.substr(slash + 1), ',');
  if (masks.size() > 2) return at(token, cat("expected ", kExpectPerKey));
  const auto ipv4 = parse_number(masks[0], 32);
  if (!ipv4) return at(token, "expected an IPv4 mask length 0-32 after '/'");
  per_key.ipv4_prefix = static_cast<std::uint8_t>(*ipv4);
  if (masks.size() == 2) {
    const auto ipv6 = parse_number(masks[1], 128);
    if (!ipv6) return at(token, "expected an IPv6 mask length 0-128 after ','");
    per_key.ipv6_prefix = static_cast<std::uint8_t>(*ipv6);
  }
  return per_key;
}

// A key's idle timeout, in nanoseconds: 1ms..24h.
Expected<std::uint64_t> parse_timeout(std::string_view token) {
  const auto duration = parse_scaled(token, kDurationScales);
  if (!duration) {
    if (parse_number(token, UINT64_MAX / 10)) return at(token, "a duration needs a unit: ns, us, ms, s, m or h");
    return not_a_keyword(token, cat("expected ", kExpectDuration));
  }
  if (duration->not_whole) return at(token, "is not a whole number of nanoseconds");
  if (duration->value < kMinTimeoutNs) return at(token, "the timeout must be at least 1ms");
  if (duration->value > kMaxTimeoutNs) return at(token, "the timeout must be at most 24h");
  return duration->value;
}

// Live keys per rule: 1..2^28, with k = 1024 and m = 1048576.
Expected<std::uint32_t> parse_capacity(std::string_view token) {
  const auto capacity = parse_scaled(token, kCapacityScales);
  if (!capacity) return not_a_keyword(token, cat("expected ", kExpectCapacity));
  if (capacity->not_whole) return at(token, "is not a whole number of keys");
  if (capacity->value < 1 || capacity->value > kMaxCapacity)
    return at(token, "the capacity must be 1 to 256m (268435456) keys");
  return static_cast<std::uint32_t>(capacity->value);
}

// One item of a color map's values: N, N-M, or (DSCP) a name; both ends at most `max`.
std::optional<std::pair<std::uint8_t, std::uint8_t>> color_map_item(std::string_view item, std::uint64_t max,
                                                                    bool dscp_names) {
  if (dscp_names) {
    for (const auto& named : kDscpNames)
      if (named.name == item) return std::pair{named.value, named.value};
  }
  const std::size_t dash = item.find('-');
  const auto first = parse_number(item.substr(0, dash), max);
  if (!first) return std::nullopt;
  if (dash == std::string_view::npos)
    return std::pair{static_cast<std::uint8_t>(*first), static_cast<std::uint8_t>(*first)};
  const auto last = parse_number(item.substr(dash + 1), max);
  if (!last) return std::nullopt;
  return std::pair{static_cast<std::uint8_t>(*first), static_cast<std::uint8_t>(*last)};
}

std::optional<std::array<std::uint8_t, 4>> parse_ipv4(std::string_view text) {
  const auto parts = split(text, '.');
  if (parts.size() != 4) return std::nullopt;
  std::array<std::uint8_t, 4> address{};
  for (std::size_t i = 0; i < 4; ++i) {
    // A leading zero is refused: inet_aton would read "010" as octal.
    if (parts[i].size() > 1 && parts[i][0] == '0') return std::nullopt;
    const auto octet = parse_number(parts[i], 255);
    if (!octet) return std::nullopt;
    address[i] = static_cast<std::uint8_t>(*octet);
  }
  return address;
}

// Colon-separated groups of 1-4 hex digits; the last may be a dotted IPv4 address (two groups).
bool parse_ipv6_groups(std::string_view text, bool ipv4_last, std::vector<std::uint16_t>& groups) {
  if (text.empty()) return true;
  const auto parts = split(text, ':');
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string_view part = parts[i];
    if (part.find('.') != std::string_view::npos) {
      if (!ipv4_last || i + 1 != parts.size()) return false;
      const auto ipv4 = parse_ipv4(part);
      if (!ipv4) return false;
      groups.push_back(static_cast<std::uint16_t>((*ipv4)[0] << 8 | (*ipv4)[1]));
      groups.push_back(static_cast<std::uint16_t>((*ipv4)[2] << 8 | (*ipv4)[3]));
      continue;
    }
    if (part.empty() || part.size() > 4) return false;
    std::uint16_t group = 0;
    for (const char c : part) {
      int digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        return false;
      group = static_cast<std::uint16_t>(group << 4 | digit);
    }
    groups.push_back(group);
  }
  return true;
}

std::optional<std::array<std::uint8_t, 16>> parse_ipv6(std::string_view text) {
  std::vector<std::uint16_t> head, tail;
  const std::size_t gap = text.find("::");
  if (gap == std::string_view::npos) {
    if (!parse_ipv6_groups(text, true, head) || head.size() != 8) return std::nullopt;
  } else {
    if (text.find("::", gap + 1) != std::string_view::npos) return std::nullopt;  // one "::" at most
    if (!parse_ipv6_groups(text.substr(0, gap), false, head)) return std::nullopt;
    if (!parse_ipv6_groups(text.substr(gap + 2), true, tail)) return std::nullopt;
    if (head.size() + tail.size() > 7) return std::nullopt;  // "::" stands for at least one group
  }
  std::array<std::uint8_t, 16> address{};
  auto put = [&](std::size_t group, std::uint16_t value) {
    address[2 * group] = static_cast<std::uint8_t>(value >> 8);
    address[2 * group + 1] = static_cast<std::uint8_t>(value);
  };
  for (std::size_t i = 0; i < head.size(); ++i) put(i, head[i]);
  for (std::size_t i = 0; i < tail.size(); ++i) put(8 - tail.size() + i, tail[i]);
  return address;
}

// ---- printing --------------------------------------------------------------------------------------

std::string format_ports(const std::vector<std::uint16_t>& ports) {
  std::string text;
  for (std::size_t i = 0; i < ports.size(); ++i) text.append(i ? "," : "").append(std::to_string(ports[i]));
  return text;
}

std::string format_port_ranges(const std::vector<PortRange>& ranges) {
  std::string text;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(ranges[i].first);
    if (ranges[i].last != ranges[i].first) text.append("-").append(std::to_string(ranges[i].last));
  }
  return text;
}

std::string format_protocol(std::uint8_t protocol) {
  for (const auto& named : kProtocols)
    if (named.value == protocol) return std::string(named.name);
  return std::to_string(protocol);
}

std::string format_length(const dataplane::MeteredLength& length) {
  std::string text = length.base == LengthBase::l1 ? "l1" : length.base == LengthBase::l2 ? "l2" : "l3";
  if (length.adjust > 0) text.append("+").append(std::to_string(length.adjust));
  if (length.adjust < 0) text.append(std::to_string(length.adjust));
  return text;
}

std::string format_action(const Action& action) {
  if (action.drop) return "drop";
  if (!action.dscp && !action.pcp) return "forward";
  std::string text;
  if (action.dscp) text.append("remark ").append(detail::format_dscp(*action.dscp));
  if (action.pcp) text.append(text.empty() ? "" : " ").append("pcp ").append(std::to_string(*action.pcp));
  return text;
}

std::string format_profile(const ProfileDef& profile) {
  const Params& p = profile.params;
  const AlgorithmSpec& spec = algorithm_spec(p.algorithm);
  std::string text = cat("profile add ", profile.name, " ", spec.name);
  for (const std::string_view name : spec.params) {
    if (name.empty()) continue;
    const ParamSpec& param = kParams[*param_index(name)];
    const std::uint64_t value = p.*param.field;
    if (value == 0) continue;  // a missing parameter is 0; a valid profile always has a rate > 0
    text.append(" ").append(name).append(" ");
    text += param.rate ? detail::format_rate(value, p.unit) : detail::format_burst(value, p.unit);
  }
  return text;
}

std::string format_per_key(const PerKey& per_key) {
  std::string text;
  for (const auto& named : kKeyKinds)
    if (named.kind == per_key.kind) text = std::string(named.name);
  const PerKey defaults;
  if (per_key.ipv6_prefix != defaults.ipv6_prefix)
    text += cat("/", std::to_string(per_key.ipv4_prefix), ",", std::to_string(per_key.ipv6_prefix));
  else if (per_key.ipv4_prefix != defaults.ipv4_prefix)
    text += cat("/", std::to_string(per_key.ipv4_prefix));
  return text;
}

std::string_view format_fallback(KeyFallback fallback) {
  for (const auto& named : kFallbacks)
    if (named.fallback == fallback) return named.name;
  return kFallbacks[0].name;
}

// The values of one color, compactly: runs of consecutive values as ranges N-M, single DSCP values by
// name where they have one.
std::string format_color_values(const ColorMap& map, Color color) {
  const std::size_t size = color_map_size(map.kind);
  std::string text;
  for (std::size_t value = 0; value < size;) {
    if (map.colors[value] != color) {
      ++value;
      continue;
    }
    std::size_t last = value;
    while (last + 1 < size && map.colors[last + 1] == color) ++last;
    if (!text.empty()) text += ',';
    if (last > value)
      text.append(std::to_string(value)).append("-").append(std::to_string(last));
    else
      text += map.kind == ColorMapKind::dscp ? detail::format_dscp(static_cast<std::uint8_t>(value))
                                             : std::to_string(value);
    value = last + 1;
  }
  return text;
}

std::string format_color_map(const ColorMap& map) {
  std::string text = cat("color-map add ", map.name, " ", color_map_kind_name(map.kind));
  bool any = false;
  for (const Color color : {Color::yellow, Color::red}) {
    const std::string values = format_color_values(map, color);
    if (values.empty()) continue;
    text.append(" ").append(color_name(color)).append(" ").append(values);
    any = true;
  }
  // Green is the default and never printed, except for a map that is all green: the command needs
  // one color.
  if (!any) text.append(" green ").append(format_color_values(map, Color::green));
  return text;
}

std::string format_rule(const Rule& rule) {
  const auto& m = rule.match;
  std::string text = cat("rule add ", rule.name);
  auto clause = [&](std::string_view keyword, const std::string& value) {
    text.append(" ").append(keyword).append(" ").append(value);
  };
  if (!m.ports.empty()) clause("port", format_ports(m.ports));
  if (m.vlan) clause("vlan", std::to_string(*m.vlan));
  if (m.src) clause("src", detail::format_prefix(*m.src));
  if (m.dst) clause("dst", detail::format_prefix(*m.dst));
  if (m.protocol) clause("proto", format_protocol(*m.protocol));
  if (!m.src_ports.empty()) clause("sport", format_port_ranges(m.src_ports));
  if (!m.dst_ports.empty()) clause("dport", format_port_ranges(m.dst_ports));
  if (!m.dscp.empty()) {
    std::string list;
    for (std::size_t i = 0; i < m.dscp.size(); ++i) list.append(i ? "," : "").append(detail::format_dscp(m.dscp[i]));
    clause("dscp", list);
  }
  clause("profile", rule.profile);
  const PerKey per_defaults;
  if (rule.per_key.kind != dataplane::KeyKind::none) {
    clause("per", format_per_key(rule.per_key));
    if (rule.per_key.idle_timeout_ns != per_defaults.idle_timeout_ns)
      clause("timeout", detail::format_duration(rule.per_key.idle_timeout_ns));
    if (rule.per_key.capacity != per_defaults.capacity)
      clause("capacity", detail::format_capacity(rule.per_key.capacity));
    if (rule.per_key.fallback != per_defaults.fallback)
      clause("fallback", std::string(format_fallback(rule.per_key.fallback)));
  }
  if (rule.parent) clause("parent", *rule.parent);
  if (rule.input == InputColor::dscp) clause("input", "dscp");
  if (rule.input == InputColor::mapped) {
    std::string input = "map";
    if (rule.pcp_map) input.append(" pcp-map ").append(*rule.pcp_map);
    if (rule.dscp_map) input.append(" dscp-map ").append(*rule.dscp_map);
    if (rule.input_default != Color::green) input.append(" unmapped ").append(color_name(rule.input_default));
    clause("input", input);
  }
  if (rule.length != dataplane::MeteredLength{}) clause("length", format_length(rule.length));
  const Rule defaults;  // only actions that differ from Rule's defaults are printed
  for (std::size_t color = 0; color < 3; ++color)
    if (rule.on_color[color] != defaults.on_color[color]) clause(kColors[color], format_action(rule.on_color[color]));
  for (std::size_t in = 0; in < 3; ++in)
    for (std::size_t out = 0; out < 3; ++out)
      if (const auto& action = rule.on_pair[in][out])
        clause(cat(kColors[in], ">", kColors[out]), format_action(*action));
  return text;
}

// ---- command parts -------------------------------------------------------------------------------

// A new profile or rule name: the syntax, no keyword, unique in its namespace.
std::optional<Error> check_new_name(std::string_view name, std::string_view kind, bool exists) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto allowed = [&](char c) { return letter(c) || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'; };
  if (!letter(name[0]) || !std::all_of(name.begin(), name.end(), allowed))
    return at(name, cat("expected a ", kind, " name: ", kNameRule));
  if (name.size() > 64)
    return at(name, cat("a ", kind, " name is at most 64 characters; this one has ", std::to_string(name.size())));
  if (detail::is_keyword(name)) return at(name, cat(name, " is a keyword and cannot name a ", kind));
  if (exists) return at(name, cat("a ", kind, " named ", name, " already exists"));
  return std::nullopt;
}

// The parameters of a profile, after its algorithm.
Expected<Params> parse_params(Cursor& c, const AlgorithmSpec& spec) {
  Params params{.algorithm = spec.algorithm};
  std::array<std::optional<std::string_view>, kParams.size()> value_token{};
  std::optional<std::size_t> unit_source;  // the first parameter given: it sets the unit
  if (c.done()) return missing_after(c.previous(), cat("the parameters of ", spec.name, ": ", spec.takes));
  while (!c.done()) {
    const std::string_view key = c.take();
    const auto index = param_index(key);
    if (!index) return not_a_keyword(key, cat("expected a parameter of ", spec.name, ": ", spec.takes));
    const ParamSpec& param = kParams[*index];
    if (!takes(spec, key)) return at(key, cat(spec.name, " takes ", spec.takes));
    if (value_token[*index]) return at(key, cat(key, " given twice"));
    const auto token = c.expect(param.rate ? "a rate such as 100mbit or 10kpps" : "a burst such as 64k or 64pkt");
    if (!token) return token.error();
    const auto quantity = param.rate ? policer::parse_rate(*token) : policer::parse_burst(*token);
    if (!quantity) return quantity.error();
    if (!unit_source) {
      unit_source = *index;
      params.unit = quantity->unit;
    } else if (quantity->unit != params.unit) {
      const ParamSpec& first = kParams[*unit_source];
      return at(*token, cat(spec.name, "'s ", key, " and ", first.name, " must both be in packets or both in bytes (",
                            first.name, " ", *value_token[*unit_source], " is in ", to_string(params.unit), ")"));
    }
    value_token[*index] = *token;
    params.*param.field = quantity->value;
  }
  if (auto valid = policer::validate(params); !valid) {
    const Error& error = valid.error();
    const auto index = param_index(error.subject);
    if (index && value_token[*index]) return at(*value_token[*index], error.message);
    const std::string_view placeholder = index && kParams[*index].rate ? " RATE" : " BURST";
    return Error{"", cat("missing '", error.subject, placeholder, "' (", error.message, ")")};
  }
  return params;
}

struct Position {
  enum class Where : std::uint8_t { first, last, before, after } where;
  std::string anchor;  // the rule named by before/after
};

// [first | last | before RULE | after RULE]; `self` is the rule being changed, if any.
Expected<std::optional<Position>> parse_position(Cursor& c, const Policy& policy, std::string_view self) {
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
  if (!policy.find_rule(*anchor)) return at(*anchor, "no such rule");
  if (*anchor == self)
    return at(*anchor, cat("a rule cannot be placed ", where == Where::before ? "before" : "after", " itself"));
  return std::optional<Position>(Position{where, std::string(*anchor)});
}

// Where a rule goes in `rules` (which does not hold it).
std::size_t insertion_index(const std::vector<Rule>& rules, const Position& position) {
  using Where = Position::Where;
  switch (position.where) {
    case Where::first:
      return 0;
    case Where::last:
      return rules.size();
    case Where::before:
    case Where::after: {
      const auto it =
          std::find_if(rules.begin(), rules.end(), [&](const Rule& r) { return r.name == position.anchor; });
      return static_cast<std::size_t>(it - rules.begin()) + (position.where == Where::after ? 1 : 0);
    }
  }
  return rules.size();
}

// ACTION: forward | drop | remark DSCP [pcp N] | pcp N [remark DSCP]
Expected<Action> parse_action(Cursor& c) {
  const auto word = c.expect(kExpectAction);
  if (!word) return word.error();
  Action action;
  if (*word == "forward") {
  } else if (*word == "drop") {
    action.drop = true;
  } else if (*word == "remark" || *word == "pcp") {
    // remark DSCP [pcp N] | pcp N [remark DSCP]: one or both parts, either first.
    bool remark = *word == "remark";
    for (int part = 0; part < 2; ++part) {
      if (remark) {
        const auto dscp = c.expect(kExpectOneDscp);
        if (!dscp) return dscp.error();
        const auto value = parse_one_dscp(*dscp);
        if (!value) return value.error();
        action.dscp = *value;
      } else {
        const auto pcp = c.expect(kExpectPcp);
        if (!pcp) return pcp.error();
        const auto value = parse_pcp(*pcp);
        if (!value) return value.error();
        action.pcp = *value;
      }
      remark = !remark;
      if (part == 0 && !c.accept(remark ? "remark" : "pcp")) break;
    }
  } else {
    return not_a_keyword(*word, cat("expected ", kExpectAction));
  }
  // remark and pcp cannot start anything else in a command: say why this one does not fit.
  const std::string_view stray = c.peek();
  if (stray == "remark" || stray == "pcp") {
    if (action.drop) return at(stray, cat("drop cannot be combined with ", stray));
    if (!action.dscp && !action.pcp)
      return at(stray, stray == "remark"
                           ? "forward takes nothing more; 'remark DSCP' alone forwards the packet remarked"
                           : "forward takes nothing more; 'pcp N' alone forwards the packet with that PCP");
    return at(stray, cat(stray, " given twice in one action"));
  }
  return action;
}

struct ClauseSpec {
  std::string_view keyword;
  std::string_view expect;  // what its value is
};
// clang-format off
enum class Clause : std::uint8_t {
  port, vlan, src, dst, proto, sport, dport, dscp, profile, per, timeout, capacity, fallback, parent, input, length
};
// clang-format on
constexpr std::size_t kClauseCount = 16;
constexpr std::array<ClauseSpec, kClauseCount> kClauses{{
    {"port", kExpectPorts},
    {"vlan", kExpectVlan},
    {"src", kExpectPrefix},
    {"dst", kExpectPrefix},
    {"proto", kExpectProtocol},
    {"sport", kExpectL4Ports},
    {"dport", kExpectL4Ports},
    {"dscp", kExpectDscp},
    {"profile", "a profile name"},
    {"per", kExpectPerKey},
    {"timeout", kExpectDuration},
    {"capacity", kExpectCapacity},
    {"fallback", kExpectFallback},
    {"parent", "a profile name"},
    {"input", kExpectInput},
    {"length", kExpectLength},
}};

// After 'input map': [pcp-map NAME] [dscp-map NAME] [unmapped COLOR], in any order, each at most once,
// at least one map. `map_token` is the word 'map', the subject when no map is given.
std::optional<Error> parse_input_maps(Cursor& c, const Policy& policy, std::string_view map_token, Rule& rule) {
  std::array<bool, 3> seen{};
  while (true) {
    const std::string_view key = c.peek();
    const std::size_t which = key == "pcp-map" ? 0 : key == "dscp-map" ? 1 : key == "unmapped" ? 2 : 3;
    if (which == 3) break;
    c.take();
    if (seen[which]) return at(key, cat(key, " given twice"));
    seen[which] = true;
    if (which == 2) {
      const auto token = c.expect(kExpectColor);
      if (!token) return token.error();
      const auto color = color_index(*token);
      if (!color) return not_a_keyword(*token, cat("expected ", kExpectColor));
      rule.input_default = static_cast<Color>(*color);
      continue;
    }
    const ColorMapKind kind = which == 0 ? ColorMapKind::pcp : ColorMapKind::dscp;
    const auto token = c.expect(cat("a ", color_map_kind_name(kind), " color map name"));
    if (!token) return token.error();
    const ColorMap* map = policy.find_color_map(*token);
    if (!map) return at(*token, "no such color map");
    if (map->kind != kind)
      return at(*token, cat("color map ", *token, " is a ", color_map_kind_name(map->kind), " map; ", key, " needs a ",
                            color_map_kind_name(kind), " map"));
    (which == 0 ? rule.pcp_map : rule.dscp_map) = std::string(*token);
  }
  if (!seen[0] && !seen[1]) return at(map_token, "input map needs a map: pcp-map NAME, dscp-map NAME or both");
  return std::nullopt;
}

// RULE-BODY: clauses in any order, each at most once.
Expected<Rule> parse_rule_body(Cursor& c, const Policy& policy, std::string_view name) {
  Rule rule;
  rule.name = std::string(name);
  auto& match = rule.match;
  using enum Clause;
  std::array<bool, kClauseCount> seen{};
  std::array<bool, 3> color_seen{};
  std::array<std::array<bool, 3>, 3> pair_seen{};
  std::string_view first_pair;    // for the error when the input is blind
  std::string_view ports_clause;  // sport or dport, for the error when the protocol has no ports
  std::string_view per_clause;    // timeout, capacity or fallback, for the error when there is no 'per'

  while (!c.done()) {
    const std::string_view key = c.take();
    const auto clause_it =
        std::find_if(kClauses.begin(), kClauses.end(), [&](const ClauseSpec& s) { return s.keyword == key; });
    if (clause_it != kClauses.end()) {
      const auto clause = static_cast<Clause>(clause_it - kClauses.begin());
      if (seen[static_cast<std::size_t>(clause)]) return at(key, cat(key, " given twice"));
      seen[static_cast<std::size_t>(clause)] = true;
      const auto value = c.expect(clause_it->expect);
      if (!value) return value.error();
      const std::string_view token = *value;
      switch (clause) {
        case port: {
          auto ports =
              parse_list<std::uint16_t>(token, kExpectPorts, [](std::string_view item) -> std::optional<std::uint16_t> {
                if (auto n = parse_number(item, 65535)) return static_cast<std::uint16_t>(*n);
                return std::nullopt;
              });
          if (!ports) return ports.error();
          match.ports = std::move(*ports);
          break;
        }
        case vlan: {
          const auto id = parse_number(token, 4095);
          if (!id) return at(token, cat("expected ", kExpectVlan));
          match.vlan = static_cast<std::uint16_t>(*id);
          break;
        }
        case src:
        case dst: {
          auto prefix = detail::parse_prefix(token);
          if (!prefix) return prefix.error();
          const auto& other = clause == src ? match.dst : match.src;
          if (other && other->ipv6 != prefix->ipv6) {
            const std::string_view family = prefix->ipv6 ? "IPv6" : "IPv4",
                                   other_family = prefix->ipv6 ? "IPv4" : "IPv6";
            return at(token, cat(key, " is ", family, " but ", clause == src ? "dst" : "src", " is ", other_family,
                                 "; src and dst must be the same family"));
          }
          (clause == src ? match.src : match.dst) = *prefix;
          break;
        }
        case proto: {
          const auto protocol = parse_protocol(token);
          if (!protocol) return protocol.error();
          if (!ports_clause.empty() && !carries_ports(*protocol))
            return at(token, cat(ports_clause, " needs proto tcp, udp or sctp (or no proto); ",
                                 format_protocol(*protocol), " has no ports"));
          match.protocol = *protocol;
          break;
        }
        case sport:
        case dport: {
          if (match.protocol && !carries_ports(*match.protocol))
            return at(key, cat(key, " needs proto tcp, udp or sctp (or no proto); ", format_protocol(*match.protocol),
                               " has no ports"));
          auto ranges = parse_l4_ports(token);
          if (!ranges) return ranges.error();
          (clause == sport ? match.src_ports : match.dst_ports) = std::move(*ranges);
          if (ports_clause.empty()) ports_clause = key;
          break;
        }
        case dscp: {
          auto values = parse_list<std::uint8_t>(token, kExpectDscp, dscp_value);
          if (!values) return values.error();
          match.dscp = std::move(*values);
          break;
        }
        case profile:
        case parent:
          if (!policy.find_profile(token)) return at(token, "no such profile");
          if (clause == profile)
            rule.profile = std::string(token);
          else
            rule.parent = std::string(token);
          break;
        case per: {
          const auto per_key = parse_per_key(token);
          if (!per_key) return per_key.error();
          // timeout, capacity and fallback may come first: keep what they set.
          rule.per_key.kind = per_key->kind;
          rule.per_key.ipv4_prefix = per_key->ipv4_prefix;
          rule.per_key.ipv6_prefix = per_key->ipv6_prefix;
          break;
        }
        case timeout: {
          const auto ns = parse_timeout(token);
          if (!ns) return ns.error();
          rule.per_key.idle_timeout_ns = *ns;
          if (per_clause.empty()) per_clause = key;
          break;
        }
        case capacity: {
          const auto keys = parse_capacity(token);
          if (!keys) return keys.error();
          rule.per_key.capacity = *keys;
          if (per_clause.empty()) per_clause = key;
          break;
        }
        case fallback: {
          const auto it = std::find_if(kFallbacks.begin(), kFallbacks.end(),
                                       [&](const FallbackName& f) { return f.name == token; });
          if (it == kFallbacks.end()) return not_a_keyword(token, cat("expected ", kExpectFallback));
          rule.per_key.fallback = it->fallback;
          if (per_clause.empty()) per_clause = key;
          break;
        }
        case input:
          if (token == "blind") {
            rule.input = InputColor::blind;
          } else if (token == "dscp") {
            rule.input = InputColor::dscp;
          } else if (token == "map") {
            rule.input = InputColor::mapped;
            if (auto error = parse_input_maps(c, policy, token, rule)) return *error;
          } else {
            return not_a_keyword(token, cat("expected ", kExpectInput));
          }
          break;
        case length: {
          const auto metered = parse_length(token);
          if (!metered) return metered.error();
          rule.length = *metered;
          break;
        }
      }
      continue;
    }

    if (const auto color = color_index(key)) {
      if (color_seen[*color]) return at(key, cat(key, " given twice"));
      color_seen[*color] = true;
      const auto action = parse_action(c);
      if (!action) return action.error();
      rule.on_color[*color] = *action;
      continue;
    }

    if (const std::size_t arrow = key.find('>'); arrow != std::string_view::npos) {
      const auto in = color_index(key.substr(0, arrow)), out = color_index(key.substr(arrow + 1));
      if (!in || !out)
        return not_a_keyword(key, "expected a color pair IN>OUT such as green>yellow (colors green, yellow, red)");
      if (*out < *in)
        return at(key,
                  cat("never happens: a color-aware meter never turns a ", kColors[*in], " packet ", kColors[*out]));
      if (pair_seen[*in][*out]) return at(key, cat(key, " given twice"));
      pair_seen[*in][*out] = true;
      if (first_pair.empty()) first_pair = key;
      const auto action = parse_action(c);
      if (!action) return action.error();
      rule.on_pair[*in][*out] = *action;
      continue;
    }

    if (key == "pcp-map" || key == "dscp-map" || key == "unmapped")
      return at(key, cat(key,
                         " belongs to 'input map', right after it: input map [pcp-map NAME] [dscp-map NAME] "
                         "[unmapped COLOR]"));
    return not_a_keyword(key, kExpectClause);
  }

  if (!seen[static_cast<std::size_t>(profile)]) return Error{"", "missing 'profile PROFILE'"};
  if (!per_clause.empty() && !seen[static_cast<std::size_t>(per)])
    return at(per_clause, cat(per_clause, " needs per-key meters: add 'per KEY' (src, dst, src+dport or 5-tuple)"));
  if (!first_pair.empty() && rule.input == InputColor::blind)
    return at(first_pair, "a color pair IN>OUT needs a color-aware input: 'input dscp' or 'input map ...'");
  return rule;
}

// ---- commands ------------------------------------------------------------------------------------

// "'<token>': <what> is used by <users[0]>; change or delete that rule first", counting the others.
Error in_use(std::string_view token, std::string_view what, const std::vector<std::string>& users) {
  if (users.size() == 1) return at(token, cat(what, " is used by ", users[0], "; change or delete that rule first"));
  const std::string others = cat(std::to_string(users.size() - 1), users.size() == 2 ? " other rule" : " other rules");
  return at(token, cat(what, " is used by ", users[0], " and ", others, "; change or delete those rules first"));
}

// The rules that use a color map, each with the role it has there ("rule r as its pcp-map").
std::vector<std::string> color_map_users(const Policy& policy, std::string_view name) {
  std::vector<std::string> users;
  for (const Rule& rule : policy.rules) {
    if (rule.input != InputColor::mapped) continue;
    if (rule.pcp_map == name)
      users.push_back(cat("rule ", rule.name, " as its pcp-map"));
    else if (rule.dscp_map == name)
      users.push_back(cat("rule ", rule.name, " as its dscp-map"));
  }
  return users;
}

// color-map add|change NAME dscp|pcp COLOR VALUES [COLOR VALUES ...], after the name: values not
// listed are green; a value listed under two colors is an error.
Expected<ColorMap> parse_color_map(Cursor& c, const Policy& policy, std::string_view name, bool add) {
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
    const ColorMap* existing = policy.find_color_map(name);
    const auto users = color_map_users(policy, name);
    if (existing->kind != map.kind && !users.empty())
      return at(*kind, cat("color map ", name, " is used by ", users[0], ", which needs a ",
                           color_map_kind_name(existing->kind), " map; change or delete that rule first"));
  }
  const bool dscp = map.kind == ColorMapKind::dscp;
  const std::string_view expect_values = dscp ? kExpectDscpValues : kExpectPcpValues;
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
    const auto ranges = parse_list<std::pair<std::uint8_t, std::uint8_t>>(
        *token, expect_values, [&](std::string_view item) { return color_map_item(item, dscp ? 63 : 7, dscp); });
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

Expected<std::string> color_map_command(Policy& policy, Cursor& c) {
  const auto verb = c.expect("add, change, delete or list");
  if (!verb) return verb.error();

  if (*verb == "add" || *verb == "change") {
    const bool add = *verb == "add";
    const auto name = c.expect("a color map name");
    if (!name) return name.error();
    const ColorMap* existing = policy.find_color_map(*name);
    if (add) {
      if (auto error = check_new_name(*name, "color map", existing != nullptr)) return *error;
    } else if (!existing) {
      return at(*name, "no such color map");
    }
    auto map = parse_color_map(c, policy, *name, add);
    if (!map) return map.error();
    if (add) {
      policy.color_maps.push_back(std::move(*map));
    } else {
      for (auto& m : policy.color_maps)
        if (m.name == *name) m = *map;
    }
    return std::string();
  }

  if (*verb == "delete") {
    const auto name = c.expect("a color map name");
    if (!name) return name.error();
    if (!policy.find_color_map(*name)) return at(*name, "no such color map");
    if (auto error = c.expect_end()) return *error;
    const auto users = color_map_users(policy, *name);
    if (!users.empty()) return in_use(*name, cat("color map ", *name), users);
    std::erase_if(policy.color_maps, [&](const ColorMap& m) { return m.name == *name; });
    return std::string();
  }

  if (*verb == "list") {
    if (auto error = c.expect_end()) return *error;
    std::string out;
    for (const auto& m : policy.color_maps) out.append(format_color_map(m)).append("\n");
    return out;
  }

  return not_a_keyword(*verb, "expected add, change, delete or list after 'color-map'");
}

Expected<std::string> profile_command(Policy& policy, Cursor& c) {
  const auto verb = c.expect("add, change, delete or list");
  if (!verb) return verb.error();

  if (*verb == "add" || *verb == "change") {
    const bool add = *verb == "add";
    const auto name = c.expect("a profile name");
    if (!name) return name.error();
    const ProfileDef* existing = policy.find_profile(*name);
    if (add) {
      if (auto error = check_new_name(*name, "profile", existing != nullptr)) return *error;
    } else if (!existing) {
      return at(*name, "no such profile");
    }
    const auto algorithm = c.expect("an algorithm: 1r2c, srtcm, trtcm or trtcm4115");
    if (!algorithm) return algorithm.error();
    const auto spec = std::find_if(kAlgorithms.begin(), kAlgorithms.end(),
                                   [&](const AlgorithmSpec& s) { return s.name == *algorithm; });
    if (spec == kAlgorithms.end())
      return not_a_keyword(*algorithm, "expected an algorithm: 1r2c, srtcm, trtcm or trtcm4115");
    auto params = parse_params(c, *spec);
    if (!params) return params.error();
    if (add) {
      policy.profiles.push_back(ProfileDef{std::string(*name), *params});
    } else {
      for (auto& p : policy.profiles)
        if (p.name == *name) p.params = *params;
    }
    return std::string();
  }

  if (*verb == "delete") {
    const auto name = c.expect("a profile name");
    if (!name) return name.error();
    if (!policy.find_profile(*name)) return at(*name, "no such profile");
    if (auto error = c.expect_end()) return *error;
    // A rule uses a profile for its meters or as its parent.
    std::vector<std::string> users;
    for (const Rule& rule : policy.rules) {
      if (rule.profile == *name)
        users.push_back(cat("rule ", rule.name));
      else if (rule.parent == *name)
        users.push_back(cat("rule ", rule.name, " as its parent"));
    }
    if (!users.empty()) return in_use(*name, cat("profile ", *name), users);
    std::erase_if(policy.profiles, [&](const ProfileDef& p) { return p.name == *name; });
    return std::string();
  }

  if (*verb == "list") {
    if (auto error = c.expect_end()) return *error;
    std::string out;
    for (const auto& p : policy.profiles) out.append(format_profile(p)).append("\n");
    return out;
  }

  return not_a_keyword(*verb, "expected add, change, delete or list after 'profile'");
}

Expected<std::string> rule_command(Policy& policy, Cursor& c) {
  const auto verb = c.expect("add, change, delete or list");
  if (!verb) return verb.error();

  if (*verb == "add" || *verb == "change") {
    const bool add = *verb == "add";
    const auto name = c.expect("a rule name");
    if (!name) return name.error();
    const Rule* existing = policy.find_rule(*name);
    if (add) {
      if (auto error = check_new_name(*name, "rule", existing != nullptr)) return *error;
    } else if (!existing) {
      return at(*name, "no such rule");
    }
    const auto position = parse_position(c, policy, add ? std::string_view() : *name);
    if (!position) return position.error();
    auto rule = parse_rule_body(c, policy, *name);
    if (!rule) return rule.error();

    // Everything is checked: from here on nothing fails.
    auto& rules = policy.rules;
    if (!add) {
      const auto it = std::find_if(rules.begin(), rules.end(), [&](const Rule& r) { return r.name == *name; });
      if (!*position) {
        *it = std::move(*rule);
        return std::string();
      }
      rules.erase(it);
    }
    const std::size_t index = insertion_index(rules, position->value_or(Position{Position::Where::last, {}}));
    rules.insert(rules.begin() + static_cast<std::ptrdiff_t>(index), std::move(*rule));
    return std::string();
  }

  if (*verb == "delete") {
    const auto name = c.expect("a rule name");
    if (!name) return name.error();
    if (!policy.find_rule(*name)) return at(*name, "no such rule");
    if (auto error = c.expect_end()) return *error;
    std::erase_if(policy.rules, [&](const Rule& r) { return r.name == *name; });
    return std::string();
  }

  if (*verb == "list") {
    if (auto error = c.expect_end()) return *error;
    std::string out;
    for (const auto& r : policy.rules) out.append(format_rule(r)).append("\n");
    return out;
  }

  return not_a_keyword(*verb, "expected add, change, delete or list after 'rule'");
}

Expected<std::string> default_command(Policy& policy, Cursor& c) {
  const auto action = parse_action(c);
  if (!action) return action.error();
  if (auto error = c.expect_end()) return *error;
  policy.default_action = *action;
  return std::string();
}

}  // namespace

// ---- detail --------------------------------------------------------------------------------------

namespace detail {

std::vector<Token> tokenize(std::string_view line) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; };
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < line.size() && line[i] != '#') {
    if (space(line[i])) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < line.size() && !space(line[i]) && line[i] != '#') ++i;
    tokens.push_back(Token{line.substr(start, i - start), start + 1});
  }
  return tokens;
}

bool is_keyword(std::string_view word) {
  if (std::find(kKeywords.begin(), kKeywords.end(), word) != kKeywords.end()) return true;
  return std::any_of(kDscpNames.begin(), kDscpNames.end(), [&](const NamedValue& n) { return n.name == word; });
}

Expected<Prefix> parse_prefix(std::string_view text) {
  const std::size_t slash = text.find('/');
  const std::string_view address_text = text.substr(0, slash);
  Prefix prefix;
  prefix.ipv6 = address_text.find(':') != std::string_view::npos;
  const unsigned max_length = prefix.ipv6 ? 128 : 32;

  if (prefix.ipv6) {
    const auto address = parse_ipv6(address_text);
    if (!address) return at(text, "expected an IPv6 prefix such as 2001:db8::/32 (RFC 4291 text form, /0-128)");
    prefix.address = *address;
  } else {
    const auto address = parse_ipv4(address_text);
    if (!address) {
      const bool looks_ipv4 =
          !address_text.empty() && address_text.find_first_not_of("0123456789.") == std::string_view::npos;
      if (looks_ipv4)
        return at(
            text,
            "expected an IPv4 prefix a.b.c.d[/n] such as 10.1.0.0/16 (a, b, c, d 0-255 without leading zeros, n 0-32)");
      return at(text, cat("expected ", kExpectPrefix));
    }
    std::copy(address->begin(), address->end(), prefix.address.begin());
  }

  prefix.length = static_cast<std::uint8_t>(max_length);
  if (slash != std::string_view::npos) {
    const auto length = parse_number(text.substr(slash + 1), max_length);
    if (!length) return at(text, cat("expected a prefix length 0-", std::to_string(max_length), " after '/'"));
    prefix.length = static_cast<std::uint8_t>(*length);
  }

  Prefix network = prefix;
  for (unsigned bit = prefix.length; bit < max_length; ++bit)
    network.address[bit / 8] &= static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
  if (network != prefix) return at(text, cat("has host bits set; did you mean ", format_prefix(network), "?"));
  return prefix;
}

std::string format_prefix(const Prefix& prefix) {
  const auto& a = prefix.address;
  std::string text;
  if (!prefix.ipv6) {
    text = cat(std::to_string(a[0]), ".", std::to_string(a[1]), ".", std::to_string(a[2]), ".", std::to_string(a[3]));
    if (prefix.length != 32) text.append("/").append(std::to_string(prefix.length));
    return text;
  }
  if (std::all_of(a.begin(), a.begin() + 10, [](std::uint8_t b) { return b == 0; }) && a[10] == 0xff && a[11] == 0xff) {
    // RFC 5952 section 5: an IPv4-mapped address ends in dotted decimal.
    text = cat("::ffff:", std::to_string(a[12]), ".", std::to_string(a[13]), ".", std::to_string(a[14]), ".",
               std::to_string(a[15]));
    if (prefix.length != 128) text.append("/").append(std::to_string(prefix.length));
    return text;
  }
  std::array<unsigned, 8> groups{};
  for (std::size_t i = 0; i < 8; ++i) groups[i] = static_cast<unsigned>(a[2 * i] << 8 | a[2 * i + 1]);
  // RFC 5952: "::" replaces the longest run of two or more zero groups, the first one on a tie.
  std::size_t best_start = 8, best_size = 1;
  for (std::size_t i = 0; i < 8;) {
    if (groups[i] != 0) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < 8 && groups[end] == 0) ++end;
    if (end - i > best_size) best_start = i, best_size = end - i;
    i = end;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < 8;) {
    if (i == best_start) {
      text += "::";
      i += best_size;
      continue;
    }
    if (!text.empty() && text.back() != ':') text += ':';
    int shift = 12;
    while (shift > 0 && (groups[i] >> shift & 0xF) == 0) shift -= 4;  // no leading zeros
    for (; shift >= 0; shift -= 4) text += kHex[groups[i] >> shift & 0xF];
    ++i;
  }
  if (prefix.length != 128) text.append("/").append(std::to_string(prefix.length));
  return text;
}

std::string format_rate(std::uint64_t rate, Unit unit) {
  struct Scale {
    std::uint64_t factor;
    std::string_view suffix;
  };
  if (unit == Unit::packets) {
    for (const Scale& s : {Scale{1'000'000'000, "gpps"}, Scale{1'000'000, "mpps"}, Scale{1'000, "kpps"}})
      if (rate != 0 && rate % s.factor == 0) return cat(std::to_string(rate / s.factor), s.suffix);
    return cat(std::to_string(rate), "pps");
  }
  // Bits per second need up to 67 bits: count them in 128.
  const unsigned __int128 bits = static_cast<unsigned __int128>(rate) * 8;
  auto decimal = [](unsigned __int128 value) {
    std::string digits;
    do {
      digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(value % 10)));
      value /= 10;
    } while (value != 0);
    return digits;
  };
  for (const Scale& s :
       {Scale{1'000'000'000'000, "tbit"}, Scale{1'000'000'000, "gbit"}, Scale{1'000'000, "mbit"}, Scale{1'000, "kbit"}})
    if (bits != 0 && bits % s.factor == 0) return cat(decimal(bits / s.factor), s.suffix);
  return cat(decimal(bits), "bit");
}

std::string format_burst(std::uint64_t burst, Unit unit) {
  if (unit == Unit::packets) return cat(std::to_string(burst), "pkt");
  struct Scale {
    std::uint64_t factor;
    std::string_view suffix;
  };
  for (const Scale& s : {Scale{1u << 30, "g"}, Scale{1u << 20, "m"}, Scale{1u << 10, "k"}})
    if (burst != 0 && burst % s.factor == 0) return cat(std::to_string(burst / s.factor), s.suffix);
  return std::to_string(burst);
}

std::string format_dscp(std::uint8_t dscp) {
  for (const auto& named : kDscpNames)
    if (named.value == dscp) return std::string(named.name);
  return std::to_string(dscp);
}

std::string format_duration(std::uint64_t ns) {
  for (const Scale& s : kDurationScales)
    if (ns != 0 && ns % s.factor == 0) return cat(std::to_string(ns / s.factor), s.suffix);
  return cat(std::to_string(ns), "ns");
}

std::string format_capacity(std::uint32_t keys) {
  for (const Scale& s : kCapacityScales)
    if (keys != 0 && keys % s.factor == 0) return cat(std::to_string(keys / s.factor), s.suffix);
  return std::to_string(keys);
}

}  // namespace detail

// ---- the API -------------------------------------------------------------------------------------

Expected<std::string> execute(Policy& policy, std::string_view line) {
  const auto tokens = detail::tokenize(line);
  if (tokens.empty()) return std::string();
  Cursor c(tokens);
  const std::string_view command = c.take();
  if (command == "profile") return profile_command(policy, c);
  if (command == "color-map") return color_map_command(policy, c);
  if (command == "rule") return rule_command(policy, c);
  if (command == "default") return default_command(policy, c);
  if (command == "show") {
    if (auto error = c.expect_end()) return *error;
    return print(policy);
  }
  return not_a_keyword(command, "unknown command; expected profile, color-map, rule, default or show");
}

Expected<Policy> load(std::string_view text, const Policy& base) {
  Policy policy = base;
  std::size_t line_number = 1;
  for (std::size_t start = 0;; ++line_number) {
    const std::size_t end = text.find('\n', start);
    const std::string_view line =
        text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (auto result = execute(policy, line); !result) {
      const Error& error = result.error();
      return Error{error.subject, cat("line ", std::to_string(line_number), ": ", error.message)};
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return policy;
}

std::string print(const Policy& policy) {
  std::string out;
  for (const auto& p : policy.profiles) out.append(format_profile(p)).append("\n");
  for (const auto& m : policy.color_maps) out.append(format_color_map(m)).append("\n");
  for (const auto& r : policy.rules) out.append(format_rule(r)).append("\n");
  if (policy.default_action != Action{})
    out.append("default ").append(format_action(policy.default_action)).append("\n");
  return out;
}

}  // namespace tricolor::control
