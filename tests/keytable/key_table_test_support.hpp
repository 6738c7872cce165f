// Shared by the key table's tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

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

// A table from KeyTable::make. The tests' tables are small: failing to get their memory is the test
// machine's fault, reported as such.
template <class Table>
std::unique_ptr<Table> made(std::uint32_t capacity, std::uint64_t idle_ticks) {
  auto table = Table::make(capacity, idle_ticks);
  if (table == nullptr) throw std::bad_alloc();
  return table;
}

}  // namespace tricolor::dataplane::test_keys
