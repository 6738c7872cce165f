#include "dataplane/replay/replay.hpp"

#include <algorithm>
#include <span>
#include <vector>

#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/parse.hpp"

namespace tricolor::dataplane {
namespace {

constexpr std::size_t kBurst = 32;

std::string action_text(const Verdict& v) {
  std::string text = v.drop ? "drop" : "forward";
  if (v.dscp_set) text += ";dscp=" + std::to_string(v.dscp);
  if (v.pcp_set) text += ";pcp=" + std::to_string(v.pcp);
  if (v.table_full) text += ";table-full";  // a new key found the rule's key table full: its fallback
  if (v.flow_refused) text += ";flow-refused";  // a new flow its key had no room for (max-flows)
  if (v.queue_full) text += ";queue-full";      // a shaping rule's queue N was full: dropped, nothing taken
  return text;
}

// The meter key of a packet of a per-key rule, read again from the frame (slow path, replay only).
std::string key_of(const PerKey& per, const PacketView& view) {
  MeterKey key;
  make_key(per, parse(view), key);
  return key_text(per, key);
}

// A time since the first packet, signed (a capture need not be in time order) and exact for any two
// 64-bit timestamps.
void write_time_since(std::ostream& csv, std::uint64_t time_ns, std::uint64_t first_ns) {
  if (time_ns >= first_ns) csv << time_ns - first_ns;
  else csv << '-' << first_ns - time_ns;
}

void write_csv_line(std::ostream& csv, std::uint64_t index, const Policy& p, const Verdict& v, const PacketView& view,
                    const CaptureRecord& record, std::uint64_t first_ns) {
  const bool ruled = v.rule != kNoRule;
  const bool aware = ruled && p.rules[v.rule].input != InputColor::blind;
  const bool keyed = ruled && p.rules[v.rule].per_key.kind != KeyKind::none;
  const bool metered = !(v.table_full && p.rules[v.rule].per_key.fallback != KeyFallback::aggregate);
  csv << index << ',' << (ruled ? p.rules[v.rule].name : "-") << ','
      << (keyed ? key_of(p.rules[v.rule].per_key, view) : "-") << ',' << (aware ? policer::to_string(v.in) : "-")
      << ',' << (ruled && metered ? policer::to_string(v.out) : "-") << ',' << action_text(v) << ',';
  write_time_since(csv, record.timestamp_ns, first_ns);
  // The frame as the rule counters count it (L2 without FCS, its length on the wire rather than the
  // bytes captured), then the length the rule's `length` clause gives it (what its meter is charged).
  csv << ',' << record.wire_length << ',';
  if (ruled) csv << v.metered_length;
  else csv << '-';
  // How long a shaping rule held it (ticks are ns here); '-' for a packet no shaping rule forwarded.
  const bool shaping = ruled && p.rules[v.rule].on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns;
  csv << ',';
  if (shaping && !v.drop) csv << v.delay;
  else csv << '-';
  csv << '\n';
}

}  // namespace

ReplayResult replay_capture(Engine& engine, CaptureReader& capture, CaptureWriter* forwarded, std::ostream* csv,
                            std::span<const ScheduledChange> changes, const ReplayControl& control) {
  constexpr std::uint64_t kProgressBursts = 1024;  // a progress report about every 32 Ki records
  constexpr std::uint64_t kRecordHeaderBytes = 16;  // pcap's; pcapng's blocks take a little more
  ReplayResult result;
  ReplayProgress progress;
  std::uint64_t bursts = 0;
  std::vector<CaptureRecord> records(kBurst);
  PacketView views[kBurst];
  Verdict verdicts[kBurst];
  std::size_t next_change = 0;
  std::uint64_t first_ns = 0;  // the capture's first packet's time: the CSV's times start from it
  // Packets a shaping rule holds, by release time (then arrival): written once the capture's time
  // passes it, or at the end.
  std::map<std::pair<std::uint64_t, std::uint64_t>, CaptureRecord> held;
  const auto release_until = [&](std::uint64_t time_ns) {
    while (!held.empty() && held.begin()->first.first <= time_ns) {
      forwarded->write(held.begin()->second);
      held.erase(held.begin());
    }
  };
  bool more = true;
  while (more) {
    if (control.stop != nullptr && control.stop->load(std::memory_order_relaxed)) {
      result.interrupted = true;
      if (forwarded != nullptr) release_until(UINT64_MAX);  // what was processed is in the output
      return result;
    }
    if (control.progress && ++bursts % kProgressBursts == 0) {
      progress.records = result.records;
      control.progress(progress);
    }
    while (next_change < changes.size() && changes[next_change].before <= result.records) {
      const ScheduledChange& change = changes[next_change++];
      if (auto installed = engine.update(change.policy); !installed) {
        result.change_refused = true;
        result.stop_reason = "the change before packet " + std::to_string(change.before) + " (" + change.what +
                             ") was refused: " + installed.error().message;
        if (forwarded != nullptr) release_until(UINT64_MAX);
        return result;
      }
    }
    // A burst ends where the next change begins.
    std::size_t burst = kBurst;
    if (next_change < changes.size()) burst = std::min<std::uint64_t>(burst, changes[next_change].before - result.records);
    std::size_t pending = 0;
    while (pending < burst && (more = capture.next(records[pending]))) ++pending;
    if (pending == 0) break;
    if (result.records == 0) first_ns = records[0].timestamp_ns;
    for (std::size_t i = 0; i < pending; ++i) {
      CaptureRecord& r = records[i];
      progress.capture_bytes += r.data.size() + kRecordHeaderBytes;
      views[i] = PacketView{r.data.data(), static_cast<std::uint32_t>(r.data.size()), r.wire_length, r.timestamp_ns,
                            r.interface, 0, false};
    }
    engine.process(std::span<PacketView>(views, pending), std::span<Verdict>(verdicts, pending));
    const Policy& policy = engine.policy();  // the set the burst ran under: replay publishes no change
    for (std::size_t i = 0; i < pending; ++i, ++result.records) {
      const Verdict& v = verdicts[i];
      if (csv != nullptr) write_csv_line(*csv, result.records, policy, v, views[i], records[i], first_ns);
      if (v.rule != kNoRule && !v.drop && policy.rules[v.rule].on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns)
        result.shaped_delays[policy.rules[v.rule].name].push_back(v.delay);
      if (forwarded == nullptr || v.drop) continue;
      if (v.delay != 0) {
        CaptureRecord& kept = held[{records[i].timestamp_ns + v.delay, result.records}];
        kept = records[i];
        kept.timestamp_ns += v.delay;
      } else {
        release_until(records[i].timestamp_ns);
        forwarded->write(records[i]);
      }
    }
  }
  if (forwarded != nullptr) release_until(UINT64_MAX);
  result.truncated = capture.truncated();
  if (result.truncated) result.stop_reason = capture.stop_reason();
  return result;
}

}  // namespace tricolor::dataplane
