// Shared by the key table's tests.
#pragma once

#include <cstdint>
#include <cstring>

namespace tricolor::dataplane::test_keys {

// Distinct keys from a number: the number in the first word, its complement in the last (a reader
// that copies a torn key sees the two disagree).
template <class Table>
typename Table::Key key_of(std::uint64_t id) {
  typename Table::Key key{};
  std::memcpy(key.data(), &id, sizeof id);
  const std::uint64_t check = ~id;
  std::memcpy(key.data() + key.size() - sizeof check, &check, sizeof check);
  return key;
}

}  // namespace tricolor::dataplane::test_keys
