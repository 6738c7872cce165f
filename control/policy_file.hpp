#pragma once
// Reading a policy file (tricolor-replay's --policy, later tricolord's startup file) before the
// language sees it. What is not a regular file is refused before a byte is read: a directory would
// read as an empty policy, /dev/zero or a FIFO would never end. A file above the size limit is
// refused too, so that a mistaken path cannot make the loader hold gigabytes.
#include <cstddef>
#include <string>

#include "policer/expected.hpp"

namespace tricolor::control {

// 64 MiB: about 600 000 rules as operators write them (about 100 bytes a line).
inline constexpr std::size_t kMaxPolicyFileBytes = std::size_t{64} << 20;

// The whole text of the file. Errors name the path and the reason ("Permission denied", "is a
// directory, not a policy file", "is 80 MiB; a policy file may have at most 64 MiB").
Expected<std::string> read_policy_file(const std::string& path, std::size_t max_bytes = kMaxPolicyFileBytes);

}  // namespace tricolor::control
