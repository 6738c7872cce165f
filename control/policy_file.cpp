#include "control/policy_file.hpp"
#include "policer/quote.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tricolor::control {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string kind_of(mode_t mode) {
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

}  // namespace

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
