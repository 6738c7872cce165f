#include "policer/units.hpp"

#include <array>
#include <string>

#include "policer/quote.hpp"

namespace tricolor::policer {
namespace {

struct Suffix {
  std::string_view name;
  std::uint64_t multiplier;
  Unit unit;
  bool bits;  // the quantity is in bits and must be divided by 8
};

constexpr std::array kRateSuffixes{
    Suffix{"bit", 1, Unit::bytes, true},
    Suffix{"kbit", 1'000, Unit::bytes, true},
    Suffix{"mbit", 1'000'000, Unit::bytes, true},
    Suffix{"gbit", 1'000'000'000, Unit::bytes, true},
    Suffix{"tbit", 1'000'000'000'000, Unit::bytes, true},
    Suffix{"pps", 1, Unit::packets, false},
    Suffix{"kpps", 1'000, Unit::packets, false},
    Suffix{"mpps", 1'000'000, Unit::packets, false},
    Suffix{"gpps", 1'000'000'000, Unit::packets, false},
};

constexpr std::array kBurstSuffixes{
    Suffix{"", 1, Unit::bytes, false},
    Suffix{"b", 1, Unit::bytes, false},
    Suffix{"k", 1u << 10, Unit::bytes, false},
    Suffix{"kb", 1u << 10, Unit::bytes, false},
    Suffix{"m", 1u << 20, Unit::bytes, false},
    Suffix{"mb", 1u << 20, Unit::bytes, false},
    Suffix{"g", 1u << 30, Unit::bytes, false},
    Suffix{"gb", 1u << 30, Unit::bytes, false},
    Suffix{"pkt", 1, Unit::packets, false},
    Suffix{"pkts", 1, Unit::packets, false},
};

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// "'<text>': <what>", the text quoted short and printable (quote.hpp); the subject is the text as given.
Error error(std::string_view text, const std::string& what) {
  return Error{std::string(text), quote(text).append(": ").append(what)};
}

// Splits "12.5kbit" into an exact number (mantissa / 10^decimals) and the suffix, then scales.
template <std::size_t N>
Expected<Quantity> parse_quantity(std::string_view text, const std::array<Suffix, N>& suffixes,
                                  std::string_view kind, std::string_view expected_units) {
  std::size_t i = 0;
  unsigned __int128 mantissa = 0;
  unsigned decimals = 0;
  bool digits = false, point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      digits = true;
      mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
      if (point) ++decimals;
      if (mantissa > (static_cast<unsigned __int128>(1) << 80) || decimals > 18)
        return error(text, std::string(kind) + " is too large or too precise");
    } else if (c == '.' && !point) {
      point = true;
    } else {
      break;
    }
  }
  if (!digits) return error(text, "expected a " + std::string(kind) + " such as " + std::string(expected_units));
  const std::string_view suffix = text.substr(i);
  for (const Suffix& s : suffixes) {
    if (!equals_ignoring_case(suffix, s.name)) continue;
    unsigned __int128 divisor = 1;
    for (unsigned d = 0; d < decimals; ++d) divisor *= 10;
    const unsigned __int128 scaled = mantissa * s.multiplier;
    if (scaled % divisor != 0)
      return error(text, "is not a whole number of " + std::string(s.bits ? "bit/s" : s.unit == Unit::bytes ? "bytes" : "packets"));
    const unsigned __int128 whole = scaled / divisor;
    if (whole > UINT64_MAX) return error(text, std::string(kind) + " is too large");
    std::uint64_t value = static_cast<std::uint64_t>(whole);
    if (s.bits) {
      auto bytes = byte_rate_from_bit_rate(value);
      if (!bytes) return error(text, "is not a whole number of bytes per second; give a multiple of 8 bit/s");
      value = *bytes;
    }
    return Quantity{value, s.unit};
  }
  if (kind == "rate" && (suffix.size() >= 3 && equals_ignoring_case(suffix.substr(suffix.size() - 3), "bps")))
    return error(text, "'bps' is ambiguous (tc reads it as bytes/s); write the rate in bit, kbit, mbit, gbit or tbit");
  if (suffix.empty()) return error(text, std::string(kind) + " needs a unit: " + std::string(expected_units));
  return error(text, "unknown unit " + quote(suffix) + "; expected " + std::string(expected_units));
}

}  // namespace

Expected<Quantity> parse_rate(std::string_view text) {
  return parse_quantity(text, kRateSuffixes, "rate", "bit, kbit, mbit, gbit, tbit, pps, kpps, mpps, gpps");
}

Expected<Quantity> parse_burst(std::string_view text) {
  return parse_quantity(text, kBurstSuffixes, "burst", "b, k, m, g (1024-based bytes) or pkt");
}

}  // namespace tricolor::policer
