#pragma once
// Reading a policy file (tricolor-replay's --policy, tricolord's startup file, tricolorctl load)
// (in control/language/, which all three programs include, and which includes none of them)
// before the language sees it. What is not a regular file is refused before a byte is read: a
// directory would read as an empty policy, /dev/zero or a FIFO would never end. A file above the size
// limit is refused too, so that a mistaken path cannot make the loader hold gigabytes.
//
// Writing one (tricolorctl save), as the user who runs the program, so that the file system's
// permissions decide, not the daemon's. What is at the path is replaced only when it is a regular
// file this user may write: a symbolic link is not followed (it could point at /etc/shadow), a device,
// a FIFO, a socket or a directory is not written into. The text goes to a new file made exclusively
// in the same directory under a random name (.NAME.XXXXXX: a link, a FIFO or a file already at a
// fixed name such as NAME.tmp can be neither followed, nor block the open, nor be clobbered), which is
// written whole, synced, given the replaced file's mode (and, as root, its owner and group), and
// renamed over the path; so the path holds the old text or the new one, never a part. On a failure
// only that new file is removed and the path is left as it was.
#include <cstddef>
#include <string>
#include <string_view>

#include "policer/expected.hpp"

namespace tricolor::control {

// 64 MiB: about 600 000 rules as operators write them (about 100 bytes a line).
inline constexpr std::size_t kMaxPolicyFileBytes = std::size_t{64} << 20;

// The whole text of the file. Errors name the path and the reason ("Permission denied", "is a
// directory, not a policy file", "is 80 MiB; a policy file may have at most 64 MiB").
Expected<std::string> read_policy_file(const std::string& path, std::size_t max_bytes = kMaxPolicyFileBytes);

// Writes `text` to `path` (relative to the working directory), as above. A new file gets mode 0666
// less the umask (or the directory's default ACL). Errors name the path and what failed, with the
// system's reason: "save: '/etc/x' is a symbolic link: not replaced", "save: 'p': cannot create a file
// in its directory '.': Permission denied".
Expected<bool> write_policy_file(const std::string& path, std::string_view text);

}  // namespace tricolor::control
