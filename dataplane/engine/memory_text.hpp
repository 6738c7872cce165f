#pragma once
// Sizes as messages show them to an operator (slow path: load-time messages, errors, reports).
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

namespace tricolor::dataplane {

// A key capacity as the language writes it: 256m, 64k, 1000.
inline std::string capacity_text(std::uint32_t capacity) {
  if (capacity != 0 && capacity % (1u << 20) == 0) return std::to_string(capacity >> 20) + "m";
  if (capacity != 0 && capacity % (1u << 10) == 0) return std::to_string(capacity >> 10) + "k";
  return std::to_string(capacity);
}

// Bytes to three significant digits in binary units: 4.03 GiB, 16.1 MiB, 548 B.
inline std::string bytes_text(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) value /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 || value >= 100 ? "%.0f %s" : value >= 10 ? "%.1f %s" : "%.2f %s", value,
                kUnits[unit]);
  return text;
}

}  // namespace tricolor::dataplane
