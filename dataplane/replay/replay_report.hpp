#pragma once
// tricolor-replay's reports of a run: the per-rule table and the JSON summary. The JSON is written as
// it goes: a per-key rule's key list (millions of keys with --all-keys) never becomes a document in
// memory; only the listed keys' binary copies are held (88 bytes each) to sort them.
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "dataplane/engine/engine.hpp"

namespace tricolor::dataplane {

struct SummaryOptions {
  std::uint64_t records = 0;  // capture records read
  bool truncated = false;     // the capture stopped early
  std::size_t top_keys = 10;  // per-key rules: keys listed by red bytes
  bool all_keys = false;      // ... or every live key
  // Shaping rules' delays by rule name (ReplayResult::shaped_delays): their percentiles. May be null.
  const std::map<std::string, std::vector<std::uint32_t>>* shaped_delays = nullptr;
};

void write_summary_json(const Engine& engine, const SummaryOptions& options, std::ostream& out);
void print_table(const Engine& engine, std::ostream& out);

}  // namespace tricolor::dataplane
