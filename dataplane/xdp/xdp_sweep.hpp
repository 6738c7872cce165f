#pragma once
// The control side's sweep of idle per-key meters (XdpProgram::sweep_keys): which keys it deletes.
// The engine's rule: a key idle for the rule's timeout starts again full at its next packet (the
// program renews it in place). The sweep deletes only keys idle for the timeout *and* a margin more,
// so that no packet of theirs is still being metered when the preallocated element is handed to the
// next new key (dataplane/xdp/README.md, "The sweep").
#include <cstdint>

namespace tricolor::dataplane::xdp {

// Beyond the timeout, before a key is deleted: far longer than any packet's time in the program.
inline constexpr std::uint64_t kSweepMarginTicks = 1'000'000'000;  // 1 s of bpf_ktime_get_ns

// True when a key whose latest check was at `last` is to be deleted at `now`. A rule without a
// timeout (0) keeps its keys; a key checked after `now` was read (last > now) is live.
constexpr bool sweep_due(std::uint64_t last, std::uint64_t now, std::uint64_t idle_ticks,
                         std::uint64_t margin = kSweepMarginTicks) noexcept {
  if (idle_ticks == 0 || now <= last) return false;
  const std::uint64_t idle = now - last;
  return idle >= idle_ticks && idle - idle_ticks >= margin;
}

}  // namespace tricolor::dataplane::xdp
