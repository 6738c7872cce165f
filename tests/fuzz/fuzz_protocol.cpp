// libFuzzer: the control socket's framing and requests (control/daemon/protocol.hpp). The input is a byte
// stream, fed to a FrameReader in pieces whose sizes the input's first byte chooses; every frame is
// parsed as a request and as a reply. Nothing may crash, the reader never holds more than a frame, and
// a request that parses comes back the same through request_json.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "control/daemon/protocol.hpp"

using namespace tricolor::control::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  FrameReader reader(1 << 16);
  std::span<const std::uint8_t> rest(data + 1, size - 1);
  while (!rest.empty() && !reader.error()) {
    const std::size_t used = reader.feed(rest.first(std::min(piece, rest.size())));
    rest = rest.subspan(used);
    if (reader.pending() > kHeaderBytes + (1 << 16)) std::abort();
    if (auto frame = reader.next()) {
      if (auto request = parse_request(*frame)) {
        auto again = parse_request(request_json(*request));
        if (!again || again->command != request->command || again->json != request->json) std::abort();
      }
      (void)parse_reply(*frame);
    } else if (used == 0) {
      break;
    }
  }
  return 0;
}
