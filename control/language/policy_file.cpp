#include "control/language/policy_file.hpp"
#include "policer/quote.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

namespace tricolor::control {
namespace {

struct Fd {
  int fd = -1;
  explicit Fd(int descriptor) noexcept : fd(descriptor) {}
  Fd(Fd&& other) noexcept : fd(std::exchange(other.fd, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string mebibytes(std::size_t bytes) {
  const std::size_t mib = bytes >> 20;
  return (mib << 20) == bytes ? std::to_string(mib) + " MiB" : std::to_string(bytes) + " bytes";
}

std::string errno_text(int error) { return std::strerror(error); }

// The directory part of `path` ("." for a bare name) and its last component.
struct Place {
  std::string directory;
  std::string name;
};

Place split_path(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// A name no one has yet in the directory, made exclusively (O_EXCL): .NAME.XXXXXX. O_NOFOLLOW and
// O_NONBLOCK are for the name's sake only: with O_EXCL nothing already there is opened at all.
struct TemporaryFile {
  std::string name;
  Fd file;
};

Expected<TemporaryFile> make_temporary(int directory, const std::string& name, mode_t mode) {
  static constexpr std::string_view kLetters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static constexpr std::size_t kNameRoom = 200;  // of NAME_MAX (255), with room for the dot and the suffix
  std::random_device random;
  std::uniform_int_distribution<std::size_t> letter(0, kLetters.size() - 1);
  int error = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string candidate = "." + name.substr(0, kNameRoom) + ".";
    for (int i = 0; i < 6; ++i) candidate += kLetters[letter(random)];
    const int fd = ::openat(directory, candidate.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, mode);
    if (fd >= 0) return TemporaryFile{std::move(candidate), Fd{fd}};
    error = errno;
    if (error != EEXIST) break;
  }
  return Error{"", errno_text(error)};
}

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

Expected<bool> write_policy_file(const std::string& path, std::string_view text) {
  const std::string shown = quote(path, kQuotePathMaxBytes);
  const auto failure = [&](const std::string& what) { return Error{path, "save: " + shown + what}; };
  const Place place = split_path(path);
  if (place.name.empty()) return failure(" names a directory: a file name goes at its end");

  Fd directory{::open(place.directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (directory.fd < 0)
    return failure(": cannot open its directory " + quote(place.directory, kQuotePathMaxBytes) + ": " + errno_text(errno));
  // What is there now, not what a link there points at.
  struct stat existing {};
  bool replaces = false;
  if (::fstatat(directory.fd, place.name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISREG(existing.st_mode)) return failure(" is " + kind_of(existing.st_mode) + ": not replaced");
    // The rename needs only the directory's permission; a file this user could not write in place is
    // not theirs to replace either.
    if (::faccessat(directory.fd, place.name.c_str(), W_OK, AT_EACCESS) != 0)
      return failure(": cannot write it: " + errno_text(errno) + "; not replaced");
    replaces = true;
  } else if (errno != ENOENT) {
    return failure(": cannot look at it: " + errno_text(errno));
  }

  // A new file is created as open(2) would make it (0666 less the umask); one that replaces another
  // is private until it has that file's owner and mode.
  auto temporary = make_temporary(directory.fd, place.name, replaces ? 0600 : 0666);
  if (!temporary)
    return failure(": cannot create a file in its directory " + quote(place.directory, kQuotePathMaxBytes) + ": " +
                   temporary.error().message);
  const std::string temporary_shown = quote(temporary->name, kQuotePathMaxBytes);
  const auto abandon = [&](const std::string& what) {
    const int error = errno;
    ::unlinkat(directory.fd, temporary->name.c_str(), 0);  // ours: made with O_EXCL above
    return failure(": " + what + ": " + errno_text(error) + "; nothing replaced");
  };
  if (!write_all(temporary->file.fd, text)) return abandon("cannot write " + temporary_shown);
  if (::fsync(temporary->file.fd) != 0) return abandon("cannot sync " + temporary_shown);
  if (replaces) {
    // The owner first: a change of owner clears the set-user-ID and set-group-ID bits.
    if (::geteuid() == 0 && ::fchown(temporary->file.fd, existing.st_uid, existing.st_gid) != 0)
      return abandon("cannot give " + temporary_shown + " the owner of the file it replaces");
    if (::fchmod(temporary->file.fd, existing.st_mode & 07777) != 0)
      return abandon("cannot give " + temporary_shown + " the mode of the file it replaces");
  }
  const int fd = std::exchange(temporary->file.fd, -1);
  if (::close(fd) != 0) return abandon("cannot write " + temporary_shown);
  if (::renameat(directory.fd, temporary->name.c_str(), directory.fd, place.name.c_str()) != 0)
    return abandon("cannot rename " + temporary_shown + " to it");
  if (::fsync(directory.fd) != 0)
    return failure(" is written, but its directory could not be synced: " + errno_text(errno));
  return true;
}

Expected<std::string> read_policy_file(const std::string& path, std::size_t max_bytes) {
  auto failure = [&](const std::string& what) { return Error{path, "policy " + quote(path, kQuotePathMaxBytes) + ": " + what}; };
  // O_NONBLOCK: opening a FIFO with no writer returns at once (and is then refused as a FIFO).
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (file.fd < 0) return failure(std::string("cannot open: ") + std::strerror(errno));
  struct stat status {};
  if (::fstat(file.fd, &status) != 0) return failure(std::string("cannot read: ") + std::strerror(errno));
  if (!S_ISREG(status.st_mode)) return failure("is " + kind_of(status.st_mode) + ", not a policy file");
  const auto limit = "a policy file may have at most " + mebibytes(max_bytes);
  if (static_cast<std::size_t>(status.st_size) > max_bytes)
    return failure("is " + mebibytes(static_cast<std::size_t>(status.st_size)) + "; " + limit);

  // The size is a hint (the file may grow while we read): read to the end, never beyond the limit.
  std::string text;
  text.resize(static_cast<std::size_t>(status.st_size));
  std::size_t length = 0;
  for (;;) {
    if (length == text.size()) {
      if (text.size() > max_bytes) return failure("grew beyond " + mebibytes(max_bytes) + " while read; " + limit);
      text.resize(std::min(max_bytes + 1, std::max<std::size_t>(text.size() * 2, 4096)));
    }
    const ssize_t got = ::read(file.fd, text.data() + length, text.size() - length);
    if (got < 0) {
      if (errno == EINTR) continue;
      return failure(std::string("cannot read: ") + std::strerror(errno));
    }
    if (got == 0) break;
    length += static_cast<std::size_t>(got);
  }
  if (length > max_bytes) return failure("grew beyond " + mebibytes(max_bytes) + " while read; " + limit);
  text.resize(length);
  return text;
}

}  // namespace tricolor::control
