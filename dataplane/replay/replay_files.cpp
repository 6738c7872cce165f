#include "dataplane/replay/replay_files.hpp"
#include "policer/quote.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <vector>

namespace tricolor::dataplane {
namespace {

// What a path names: the inode of an existing file, else the absolute path with every link and dot
// resolved (an output that does not exist yet).
struct Identity {
  bool exists = false;
  bool character_device = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string resolved;

  bool same(const Identity& other) const {
    if (character_device || other.character_device) return false;
    if (exists != other.exists) return false;
    return exists ? device == other.device && inode == other.inode : resolved == other.resolved;
  }
};

Identity identify(const std::string& path) {
  Identity id;
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0) {
    id.exists = true;
    id.character_device = S_ISCHR(status.st_mode);
    id.device = status.st_dev;
    id.inode = status.st_ino;
    return id;
  }
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(path, ec);
  const auto resolved = ec ? std::filesystem::path(path) : std::filesystem::weakly_canonical(absolute, ec);
  id.resolved = (ec ? absolute : resolved).lexically_normal().string();
  return id;
}

std::string named(const NamedFile& f) { return f.option + " " + quote(f.path, kQuotePathMaxBytes); }

}  // namespace

std::optional<std::string> same_file_conflict(std::span<const NamedFile> files) {
  std::vector<Identity> ids;
  ids.reserve(files.size());
  for (const NamedFile& f : files) ids.push_back(identify(f.path));
  for (std::size_t a = 0; a < files.size(); ++a) {
    for (std::size_t b = a + 1; b < files.size(); ++b) {
      if (!files[a].output && !files[b].output) continue;  // two inputs may be one file
      if (!ids[a].same(ids[b])) continue;
      const NamedFile& out = files[a].output ? files[a] : files[b];
      const NamedFile& other = files[a].output ? files[b] : files[a];
      if (!other.output)
        return named(out) + " is the same file as " + named(other) + ": writing it would destroy the input";
      return named(files[a]) + " and " + named(files[b]) + " are the same file: each output needs a file of its own";
    }
  }
  return std::nullopt;
}

}  // namespace tricolor::dataplane
