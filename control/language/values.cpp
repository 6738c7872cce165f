// The values of the command language: the tokenizer, parsers of single values and their printed forms.
#include "control/language/values.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/language/language_internal.hpp"
#include "control/language/words.hpp"

namespace tricolor::control::detail {

using dataplane::LengthBase;
using dataplane::PerKey;
using dataplane::PortRange;
using dataplane::Prefix;
using policer::Unit;

namespace {

// A comma-separated list whose items `parse_item` reads; `what` describes the whole list.
template <class T, class ParseItem>
Expected<std::vector<T>> parse_list(std::string_view token, std::string_view what, ParseItem parse_item) {
  std::vector<T> values;
  std::string_view bad;
  const bool all_valid = for_each_item(token, ',', [&](std::string_view item) {
    std::optional<T> value = parse_item(item);
    if (!value) {
      bad = item;
      return false;
    }
    values.push_back(*value);
    return true;
  });
  if (all_valid) return values;
  if (bad.size() == token.size()) return not_a_keyword(token, cat("expected ", what));  // the only item
  if (bad.empty()) return at(token, cat("empty item in the list; expected ", what));
  return at(token, cat(quote(bad), " is not a valid item; expected ", what));
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



std::optional<std::array<std::uint8_t, 4>> parse_ipv4(std::string_view text) {
  std::array<std::uint8_t, 4> address{};
  std::size_t parts = 0;
  const bool valid = for_each_item(text, '.', [&](std::string_view part) {
    // A leading zero is refused: inet_aton would read "010" as octal.
    if (parts == 4 || (part.size() > 1 && part[0] == '0')) return false;
    const auto octet = parse_number(part, 255);
    if (!octet) return false;
    address[parts++] = static_cast<std::uint8_t>(*octet);
    return true;
  });
  if (!valid || parts != 4) return std::nullopt;
  return address;
}

// Colon-separated groups of 1-4 hex digits; the last may be a dotted IPv4 address (two groups). More
// than 8 groups are refused as soon as they are seen.
bool parse_ipv6_groups(std::string_view text, bool ipv4_last, std::vector<std::uint16_t>& groups) {
  if (text.empty()) return true;
  return for_each_item(text, ':', [&](std::string_view part) {
    if (groups.size() >= 8) return false;
    if (part.find('.') != std::string_view::npos) {
      const bool last = part.data() + part.size() == text.data() + text.size();
      if (!ipv4_last || !last) return false;
      const auto ipv4 = parse_ipv4(part);
      if (!ipv4) return false;
      groups.push_back(static_cast<std::uint16_t>((*ipv4)[0] << 8 | (*ipv4)[1]));
      groups.push_back(static_cast<std::uint16_t>((*ipv4)[2] << 8 | (*ipv4)[3]));
      return true;
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
    return true;
  });
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

}  // namespace

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

// A value listed twice: refused, so that a list holds each value once (50 000 copies of one port
// would otherwise be kept, matched and printed back).
template <class T>
std::optional<Error> listed_twice(std::string_view token, std::vector<T> values, std::string_view what) {
  std::sort(values.begin(), values.end());
  const auto twice = std::adjacent_find(values.begin(), values.end());
  if (twice == values.end()) return std::nullopt;
  return at(token, cat(what, " ", std::to_string(unsigned{*twice}), " is listed twice; list each once"));
}

Expected<std::vector<std::uint16_t>> parse_ports(std::string_view token) {
  auto ports = parse_list<std::uint16_t>(token, kExpectPorts, [](std::string_view item) -> std::optional<std::uint16_t> {
    if (auto n = parse_number(item, 65535)) return static_cast<std::uint16_t>(*n);
    return std::nullopt;
  });
  if (!ports) return ports;
  if (auto error = listed_twice(token, *ports, "port")) return *error;
  return ports;
}

Expected<std::vector<std::uint8_t>> parse_dscp_list(std::string_view token) {
  auto values = parse_list<std::uint8_t>(token, kExpectDscp, dscp_value);
  if (!values) return values;
  if (auto error = listed_twice(token, *values, "DSCP")) return *error;
  return values;
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
  // Each port once: ranges that overlap (or a port listed twice) are refused, naming the two.
  std::vector<PortRange> sorted = *ranges;
  std::sort(sorted.begin(), sorted.end(), [](const PortRange& a, const PortRange& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i].first <= sorted[i - 1].last) {
      const auto text = [](const PortRange& r) {
        return r.first == r.last ? std::to_string(r.first) : std::to_string(r.first) + "-" + std::to_string(r.last);
      };
      return at(token, cat("ports ", text(sorted[i - 1]), " and ", text(sorted[i]),
                           sorted[i - 1].first == sorted[i - 1].last && sorted[i].last == sorted[i].first
                               ? " are the same port; list each once"
                               : " overlap; list each port once"));
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
  const std::string_view masks = token.substr(slash + 1);
  const std::size_t comma = masks.find(',');
  if (comma != std::string_view::npos && masks.find(',', comma + 1) != std::string_view::npos)
    return at(token, cat("expected ", kExpectPerKey));
  const auto ipv4 = parse_number(masks.substr(0, comma), 32);
  if (!ipv4) return at(token, "expected an IPv4 mask length 0-32 after '/'");
  per_key.ipv4_prefix = static_cast<std::uint8_t>(*ipv4);
  if (comma != std::string_view::npos) {
    const auto ipv6 = parse_number(masks.substr(comma + 1), 128);
    if (!ipv6) return at(token, "expected an IPv6 mask length 0-128 after ','");
    per_key.ipv6_prefix = static_cast<std::uint8_t>(*ipv6);
  }
  return per_key;
}

// A duration in nanoseconds, any size the caller then checks (UINT64_MAX: at least that); a unit is required.
Expected<std::uint64_t> parse_duration(std::string_view token) {
  const auto duration = parse_scaled(token, kDurationScales);
  if (!duration) {
    if (parse_number(token, UINT64_MAX / 10)) return at(token, "a duration needs a unit: ns, us, ms, s, m or h");
    return not_a_keyword(token, cat("expected ", kExpectDuration));
  }
  if (duration->not_whole) return at(token, "is not a whole number of nanoseconds");
  return duration->value;
}

// A key's idle timeout, in nanoseconds: 1ms..24h.
Expected<std::uint64_t> parse_timeout(std::string_view token) {
  const auto duration = parse_duration(token);
  if (!duration) return duration;
  if (*duration < kMinTimeoutNs) return at(token, "the timeout must be at least 1ms");
  if (*duration > kMaxTimeoutNs) return at(token, "the timeout must be at most 24h");
  return *duration;
}

// A count (digits only) that fits 32 bits; `what` names it in the message of a larger one.
Expected<std::uint32_t> parse_count(std::string_view token, std::string_view what) {
  if (const auto count = parse_number(token, UINT32_MAX)) return static_cast<std::uint32_t>(*count);
  if (!token.empty() && std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return at(token, cat(what, " ", token, " is far out of range"));
  return not_a_keyword(token, cat("expected ", kExpectCount));
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

// A shaping rule's queue: 1..2^20 packets, with k = 1024 and m = 1048576.
Expected<std::uint32_t> parse_shape_queue(std::string_view token) {
  const auto packets = parse_scaled(token, kCapacityScales);
  if (!packets) return not_a_keyword(token, cat("expected ", kExpectShapeQueue));
  if (packets->not_whole) return at(token, "is not a whole number of packets");
  if (packets->value < 1 || packets->value > dataplane::kMaxShapeQueue)
    return at(token, "queue must be 1 to 1m (1048576) packets");
  return static_cast<std::uint32_t>(packets->value);
}

Expected<std::vector<std::pair<std::uint8_t, std::uint8_t>>> parse_color_map_values(std::string_view token,
                                                                                    dataplane::ColorMapKind kind) {
  const bool dscp = kind == dataplane::ColorMapKind::dscp;
  return parse_list<std::pair<std::uint8_t, std::uint8_t>>(
      token, dscp ? kExpectDscpValues : kExpectPcpValues,
      [&](std::string_view item) { return color_map_item(item, dscp ? 63 : 7, dscp); });
}

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

}  // namespace tricolor::control::detail
