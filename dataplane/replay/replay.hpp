#pragma once
// tricolor-replay's run: a capture through the engine, offline and deterministically, as one worker
// whose clock is the capture (timestamps in ns, the engine's tick rate 1e9), writing the forwarded
// packets (remarked where the policy says so) and one CSV line per packet. The program around it
// (control/replay/tricolor_replay.cpp) reads the policy and the options and reports.
#include <atomic>
#include <functional>
#include <map>
#include <vector>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>

#include "dataplane/replay/capture.hpp"
#include "dataplane/engine/engine.hpp"

namespace tricolor::dataplane {

inline constexpr std::uint64_t kReplayTicksPerSecond = 1'000'000'000;  // capture timestamps are in ns
// New columns go at the end, so that readers of the older ones keep working.
inline constexpr const char* kReplayCsvHeader =
    "index,rule,key,in_color,out_color,action,time_ns,frame_bytes,metered_bytes,delay_ns";

struct ReplayResult {
  std::uint64_t records = 0;  // capture records read and processed
  bool truncated = false;     // the capture stopped early
  std::string stop_reason;    // why, if it did
  bool change_refused = false;  // a scheduled change was refused: stop_reason says which and why
  bool interrupted = false;     // ReplayControl::stop was set: the run ended after that burst
  // Shaping rules, by name: the delay (ns) of every packet each forwarded, in arrival order (0 for
  // those that left at once), for the summary's percentiles.
  std::map<std::string, std::vector<std::uint32_t>> shaped_delays;
};

// How far a run has come, for a progress line.
struct ReplayProgress {
  std::uint64_t records = 0;
  std::uint64_t capture_bytes = 0;  // about how much of the capture file: each record's bytes and header
};

// What the caller may do between bursts: stop the run (at SIGINT, say: what was processed is in the
// outputs, each record whole) and be told how far it has come (about every 32 Ki records).
struct ReplayControl {
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const ReplayProgress&)> progress;
};

// A live change, as tricolord applies one: the policy installed (Engine::update) just before the
// packet of index `before` (from 0), which starts the first burst under the new rule set.
struct ScheduledChange {
  std::uint64_t before = 0;
  Policy policy;
  std::string what;  // the command, for messages
};

// Every record of `capture`, in bursts, through `engine` (its worker 0, on this thread). `forwarded`
// (optional) gets the packets not dropped, each at the time it leaves: a packet a shaping rule holds
// is written with its release time, after the packets that leave before it (the output is in time
// order where the capture was); `csv` (optional) one line per packet after its header, in capture order.
// `changes`, in order of `before`: a burst never spans one. A change the engine refuses stops the
// run (stop_reason says why).
ReplayResult replay_capture(Engine& engine, CaptureReader& capture, CaptureWriter* forwarded, std::ostream* csv,
                            std::span<const ScheduledChange> changes = {}, const ReplayControl& control = {});

}  // namespace tricolor::dataplane
