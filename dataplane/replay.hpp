#pragma once
// tricolor-replay's run: a capture through the engine, offline and deterministically, as one worker
// whose clock is the capture (timestamps in ns, the engine's tick rate 1e9), writing the forwarded
// packets (remarked where the policy says so) and one CSV line per packet. The program around it
// (control/tricolor_replay.cpp) reads the policy and the options and reports.
#include <cstdint>
#include <ostream>
#include <string>

#include "dataplane/capture.hpp"
#include "dataplane/engine.hpp"

namespace tricolor::dataplane {

inline constexpr std::uint64_t kReplayTicksPerSecond = 1'000'000'000;  // capture timestamps are in ns
inline constexpr const char* kReplayCsvHeader = "index,rule,key,in_color,out_color,action";

struct ReplayResult {
  std::uint64_t records = 0;  // capture records read and processed
  bool truncated = false;     // the capture stopped early
  std::string stop_reason;    // why, if it did
};

// Every record of `capture`, in bursts, through `engine` (its worker 0, on this thread). `forwarded`
// (optional) gets the packets not dropped; `csv` (optional) one line per packet after its header.
ReplayResult replay_capture(Engine& engine, CaptureReader& capture, CaptureWriter* forwarded, std::ostream* csv);

}  // namespace tricolor::dataplane
