// tricolor-replay: runs a policy over a capture, offline and deterministically, with the daemon's own
// engine (parse, classify, meter, act) as one worker whose clock is the packets' timestamps at 1e9
// ticks per second (dataplane/replay/replay.hpp). This program combines the command language with the engine:
// it reads the options and the policy, checks the files, runs the capture through, and reports.
//
// Outputs: the forwarded packets as a pcap (remarked where the policy says so), a per-packet CSV
// (kReplayCsvHeader: index,rule,key,in_color,out_color,action,time_ns,frame_bytes,metered_bytes), a JSON summary per rule (per-key rules: their keys, the
// top N by red bytes or all), and a table on stdout.
//
// On a terminal, a progress line on stderr (packets, rate, elapsed, time left); at Ctrl-C (SIGINT) the
// run stops after the burst at hand, every output is finished with what was processed (each valid:
// whole records, whole lines), and it says how far it got; a second Ctrl-C ends it at once.
//
// Exit status: 0 done; 1 the command line is wrong; 2 a policy, capture or output cannot be used (the
// message names it and why), or memory ran out; 130 interrupted (SIGINT), the outputs holding what was
// processed.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <charconv>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "control/language/language.hpp"
#include "control/language/policy_file.hpp"
#include "dataplane/replay/capture.hpp"
#include "dataplane/replay/demo.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/engine/engine.hpp"
#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/memory_text.hpp"
#include "dataplane/replay/replay.hpp"
#include "dataplane/replay/replay_files.hpp"
#include "dataplane/replay/replay_report.hpp"
#include "policer/quote.hpp"

namespace {

using namespace tricolor;
using namespace tricolor::dataplane;

constexpr int kExitUsage = 1;  // the command line is wrong
constexpr int kExitInput = 2;  // a policy, capture or output that cannot be used
constexpr int kExitInterrupted = 130;  // SIGINT, as a shell reports a program it ended

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true, std::memory_order_relaxed); }

// SIGINT stops the run between two bursts; the handler is reset by its first call, so a second Ctrl-C
// ends the program at once, as Ctrl-C does.
void stop_at_interrupt() {
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = on_interrupt;
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
}

std::string clock_text(double seconds) {
  const auto s = static_cast<std::uint64_t>(seconds);
  char text[32];
  if (s >= 3600) std::snprintf(text, sizeof text, "%llu:%02llu:%02llu", static_cast<unsigned long long>(s / 3600),
                               static_cast<unsigned long long>(s / 60 % 60), static_cast<unsigned long long>(s % 60));
  else std::snprintf(text, sizeof text, "%llu:%02llu", static_cast<unsigned long long>(s / 60), static_cast<unsigned long long>(s % 60));
  return text;
}

// The progress line, on a terminal only: rewritten in place at most twice a second; the time left is
// from the share of the capture file read so far.
class ProgressLine {
 public:
  explicit ProgressLine(std::uint64_t capture_bytes) : capture_bytes_(capture_bytes) {}
  void operator()(const ReplayProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.2f", elapsed > 0 ? static_cast<double>(p.records) / elapsed / 1e6 : 0.0);
    std::string line = "tricolor-replay: " + std::to_string(p.records) + " packets, " + rate + " Mpps, " +
                       clock_text(elapsed) + " elapsed";
    if (capture_bytes_ != 0 && p.capture_bytes != 0 && p.capture_bytes < capture_bytes_)
      line += ", about " + clock_text(elapsed * static_cast<double>(capture_bytes_ - p.capture_bytes) /
                                      static_cast<double>(p.capture_bytes)) + " left";
    std::cerr << "\r" << line << "\033[K" << std::flush;
    shown_ = true;
  }
  void clear() {
    if (shown_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  std::uint64_t capture_bytes_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = start_;
  bool shown_ = false;
};
// --top-keys: no rule holds more keys than the largest capacity (2^28); --all-keys lists them all.
constexpr std::uint64_t kMaxTopKeys = std::uint64_t{1} << 28;
// --max-classifier-entries: rte_acl counts a trie's entries in 32 bits.
constexpr std::uint64_t kMaxClassifierEntries = UINT32_MAX;

// A path in a message: quoted, escaped (see policer/quote.hpp).
std::string path_text(const std::string& path) { return quote(path, kQuotePathMaxBytes); }

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "tricolor-replay: " << message << "\n";
  std::exit(kExitInput);
}

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "tricolor-replay: " << message << "\n";
  std::exit(kExitUsage);
}

// Standard output (the table, the demo's text) is an output like the files: a failed write fails the
// run rather than losing the table.
void check_stdout() {
  errno = 0;
  std::cout.flush();
  if (!std::cout) fail(std::string("cannot write to standard output: ") + std::strerror(errno != 0 ? errno : EIO));
}

// A count given as an option: digits only (no sign, no exponent), within [least, most].
std::uint64_t parse_count(const std::string& option, const std::string& text, std::uint64_t least, std::uint64_t most,
                          const std::string& what, const std::string& note = "") {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const std::string at = option + " " + quote(text) + ": ";
  if (!digits || end != text.data() + text.size())
    usage_error(at + "expected " + what + ", " + std::to_string(least) + " or more" + note);
  if (ec == std::errc::result_out_of_range || value > most)
    usage_error(at + "at most " + std::to_string(most) + note);
  if (value < least) usage_error(at + "at least " + std::to_string(least) + note);
  return value;
}

// pcap's seconds are 32 bits: a capture stamped after 2106 cannot be written as it was read.
void warn_wrapped_timestamps(const std::string& path, const CaptureWriter::OutOfRangeTimestamps& wrapped) {
  if (wrapped.count == 0) return;
  const auto seconds = static_cast<std::time_t>(wrapped.first_ns / kReplayTicksPerSecond);
  std::tm utc{};
  char first[64] = "?";
  if (gmtime_r(&seconds, &utc) != nullptr) std::strftime(first, sizeof first, "%Y-%m-%d %H:%M:%S UTC", &utc);
  std::cerr << "tricolor-replay: warning: --out " << path_text(path) << ": " << wrapped.count
            << (wrapped.count == 1 ? " packet is" : " packets are") << " stamped after 2106-02-07 06:28:15 UTC (the first "
            << first << "), beyond pcap's 32-bit seconds; the file holds their times minus 2^32 s (136 years)\n";
}

// What each per-key rule's key table costs, said when the policy is installed: the index is paid
// now (and was refused if it could not be), the entries as keys arrive.
void report_key_memory(const Engine& engine) {
  using Entry = KeyTable<kKeySize>::Entry;
  const Policy& policy = engine.policy();
  for (std::size_t r = 0; r < policy.rules.size(); ++r) {
    const Rule& rule = policy.rules[r];
    if (rule.per_key.kind == KeyKind::none) continue;
    std::cerr << "tricolor-replay: rule " << rule.name << ": key index " << bytes_text(engine.key_index_bytes(r))
              << " for capacity " << capacity_text(rule.per_key.capacity)
              << ", allocated and resident now; entries " << sizeof(Entry) << " B per live key, in "
              << bytes_text(sizeof(Entry) * key_table_detail::kChunkEntries) << " chunks as keys arrive ("
              << bytes_text(engine.key_spare_bytes(r)) << " of them kept ready)\n";
  }
}

struct Options {
  std::string policy_path, capture_path, out_path, csv_path, json_path, demo_dir, top_keys = "10";
  std::string max_classifier_entries = std::to_string(kDefaultMaxClassifierEntries);
  std::string classifier_scan_entries = std::to_string(kDefaultScanEntries);
  std::string flow_cache_entries = "0";
  bool table = false, all_keys = false, classifier_no_hash = false;
  std::uint64_t demo_seconds = 3, demo_seed = 1;
  std::vector<std::string> changes;  // --change-at N:LINE, in the order given
};

// --change-at N:LINE, each applied with the command language to the policy as the ones before it left
// it: what tricolord does with the same lines sent over its socket while the capture plays.
std::vector<ScheduledChange> schedule_changes(const std::vector<std::string>& changes, const Policy& start) {
  std::vector<ScheduledChange> scheduled;
  Policy policy = start;
  for (const std::string& change : changes) {
    const std::string at = "--change-at " + quote(change, 200) + ": ";
    const auto colon = change.find(':');
    std::uint64_t before = 0;
    const char* end = change.data() + (colon == std::string::npos ? 0 : colon);
    const auto [stop, ec] = std::from_chars(change.data(), end, before);
    if (colon == std::string::npos || colon == 0 || ec != std::errc{} || stop != end)
      usage_error(at + "expected INDEX:COMMAND (INDEX: the packet, from 0, before which the command applies)");
    if (!scheduled.empty() && before < scheduled.back().before)
      usage_error(at + "the changes must come in the order of their packets (" + std::to_string(before) + " after " +
                  std::to_string(scheduled.back().before) + ")");
    const std::string line = change.substr(colon + 1);
    auto output = control::execute(policy, line);
    if (!output) usage_error(at + output.error().message);
    scheduled.push_back({before, policy, line});
  }
  return scheduled;
}

int run_program(Options& o) {
  if (!o.demo_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.demo_dir, ec);
    if (ec) fail("cannot create " + path_text(o.demo_dir) + ": " + ec.message());
    o.policy_path = o.demo_dir + "/demo.policy";
    o.capture_path = o.demo_dir + "/demo.pcap";
    o.out_path = o.demo_dir + "/forwarded.pcap";
    o.csv_path = o.demo_dir + "/packets.csv";
    o.json_path = o.demo_dir + "/summary.json";
    o.table = true;
    if (auto ok = write_demo_policy(o.policy_path); !ok) fail(ok.error().message);
    auto written = write_demo_capture(o.capture_path, o.demo_seconds, o.demo_seed);
    if (!written) fail(written.error().message);
    std::cout << "tricolor-replay --demo: " << *written << " packets over " << o.demo_seconds << " s in "
              << o.capture_path << ", policy " << o.policy_path << "\n\n"
              << demo_policy() << "\n";
    check_stdout();
  }
  if (o.out_path.empty() && o.csv_path.empty() && o.json_path.empty()) o.table = true;

  // Before any output is opened (opening truncates): no output may be an input or another output.
  std::vector<NamedFile> files = {{"--policy", o.policy_path, false}, {"--in", o.capture_path, false}};
  if (!o.out_path.empty()) files.push_back({"--out", o.out_path, true});
  if (!o.csv_path.empty()) files.push_back({"--csv", o.csv_path, true});
  if (!o.json_path.empty()) files.push_back({"--json", o.json_path, true});
  if (o.table) files.push_back({"standard output (the table)", "/dev/stdout", true});
  if (auto conflict = same_file_conflict(files)) fail(*conflict);

  const auto top_keys = static_cast<std::size_t>(
      parse_count("--top-keys", o.top_keys, 0, kMaxTopKeys, "a number of keys",
                  " (the most keys a rule can hold; --all-keys lists every key)"));
  EngineLimits limits;
  limits.max_classifier_entries = static_cast<std::size_t>(
      parse_count("--max-classifier-entries", o.max_classifier_entries, 1, kMaxClassifierEntries,
                  "a number of classifier entries"));
  limits.classifier_scan_entries = static_cast<std::size_t>(
      parse_count("--classifier-scan-entries", o.classifier_scan_entries, 0, kMaxScanEntries,
                  "a number of classifier entries"));
  limits.classifier_exact_hash = !o.classifier_no_hash;
  limits.flow_cache_entries = static_cast<std::size_t>(
      parse_count("--flow-cache-entries", o.flow_cache_entries, 0, kMaxFlowCacheEntries, "a number of flow cache entries"));
  if (limits.flow_cache_entries == 1 || (limits.flow_cache_entries & (limits.flow_cache_entries - 1)) != 0)
    fail("--flow-cache-entries " + o.flow_cache_entries + ": expected a power of two from 2 to " +
         std::to_string(kMaxFlowCacheEntries) + ", or 0 for no cache");
  auto text = control::read_policy_file(o.policy_path);
  if (!text) fail(text.error().message);
  auto policy = control::load(*text);
  if (!policy) fail("policy " + path_text(o.policy_path) + ": " + policy.error().message);
  text = std::string();  // the policy is loaded: free its text
  const std::vector<ScheduledChange> changes = schedule_changes(o.changes, *policy);
  auto reader = CaptureReader::open(o.capture_path);
  if (!reader) fail(reader.error().message);

  std::unique_ptr<CaptureWriter> writer;
  if (!o.out_path.empty()) {
    auto opened = CaptureWriter::open(o.out_path, (*reader)->link_type());  // written back as it came
    if (!opened) fail(opened.error().message);
    writer = std::move(*opened);
  }
  std::ofstream csv;
  if (!o.csv_path.empty()) {
    csv.open(o.csv_path);
    if (!csv) fail("cannot write " + path_text(o.csv_path) + ": " + std::strerror(errno));
    csv << kReplayCsvHeader << '\n';
  }

  auto eal = MemoryOnlyEal::init("tricolor-replay");
  if (!eal) fail(eal.error().message);
  EngineOptions options;
  options.limits = limits;
  auto engine = Engine::create(*policy, *policer::TickRate::make(kReplayTicksPerSecond), options);
  if (!engine) {
    std::string message = "policy " + path_text(o.policy_path) + ": " + engine.error().message;
    // The engine says "raise the limit"; here that is an option.
    if (const auto at = message.find("raise the limit"); at != std::string::npos)
      message.replace(at, 15, "raise the limit with --max-classifier-entries");
    fail(message);
  }
  report_key_memory(**engine);

  stop_at_interrupt();
  std::error_code size_error;
  const std::uint64_t capture_bytes = std::filesystem::file_size(o.capture_path, size_error);
  ProgressLine progress(size_error ? 0 : capture_bytes);
  ReplayControl control{&g_interrupted, nullptr};
  if (::isatty(STDERR_FILENO) == 1) control.progress = [&](const ReplayProgress& p) { progress(p); };
  const ReplayResult run =
      replay_capture(**engine, **reader, writer.get(), csv.is_open() ? &csv : nullptr, changes, control);
  progress.clear();
  if (run.change_refused) fail(run.stop_reason);
  const std::uint64_t index = run.records;
  const bool truncated = run.truncated || run.interrupted;
  if (run.interrupted)
    std::cerr << "tricolor-replay: interrupted (SIGINT) after " << index << " packets of "
              << path_text(o.capture_path) << ": every output holds those and is whole\n";
  for (const ScheduledChange& change : changes)
    if (change.before >= index && !run.interrupted)
      std::cerr << "tricolor-replay: the change before packet " << change.before << " (" << quote(change.what, 200)
                << ") was never applied: the capture has " << index << " packets\n";
  if (run.truncated)
    std::cerr << "tricolor-replay: " << path_text(o.capture_path) << ": reading stopped after " << index << " packets ("
              << run.stop_reason << "); the results cover what was read\n";
  if (writer) {
    if (auto closed = writer->close(); !closed) fail(closed.error().message);
    warn_wrapped_timestamps(o.out_path, writer->out_of_range_timestamps());
  }
  if (csv.is_open()) {
    errno = 0;
    csv.close();
    if (!csv) fail("cannot write " + path_text(o.csv_path) + ": " + std::strerror(errno != 0 ? errno : EIO));
  }
  if (!o.json_path.empty()) {
    std::ofstream json(o.json_path);
    if (!json) fail("cannot write " + path_text(o.json_path) + ": " + std::strerror(errno));
    write_summary_json(**engine, SummaryOptions{index, truncated, top_keys, o.all_keys, &run.shaped_delays}, json);
    errno = 0;
    json.close();
    if (!json) fail("cannot write " + path_text(o.json_path) + ": " + std::strerror(errno != 0 ? errno : EIO));
  }
  if (o.table) {
    print_table(**engine, std::cout);
    check_stdout();
  }
  return run.interrupted ? kExitInterrupted : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tricolor-replay: run a tricolor policy over a pcap or pcapng capture, offline and deterministically"};
  Options o;
  auto* policy = app.add_option("-p,--policy", o.policy_path, "policy file in the command language");
  auto* in = app.add_option("-i,--in", o.capture_path, "input capture (pcap or pcapng; the pcapng interface is the ingress port)");
  auto* out = app.add_option("-o,--out", o.out_path, "write the forwarded packets (remarked) as a nanosecond pcap");
  auto* csv = app.add_option("--csv", o.csv_path, std::string("write one line per packet: ") + kReplayCsvHeader + " (time_ns: since the first packet)");
  auto* json = app.add_option("--json", o.json_path, "write the summary per rule as JSON");
  app.add_option("--top-keys", o.top_keys, "per-key rules: list this many keys in the JSON, by red bytes (default 10)");
  app.add_flag("--all-keys", o.all_keys, "per-key rules: list every live key in the JSON");
  app.add_option("--max-classifier-entries", o.max_classifier_entries,
                 "refuse a policy whose rules expand to more classifier entries than this (default " +
                     std::to_string(kDefaultMaxClassifierEntries) + "; see doc/engine.md)");
  app.add_option("--classifier-scan-entries", o.classifier_scan_entries,
                 "a policy of at most this many classifier entries is compared with each packet in rule order "
                 "instead of put in a trie (default " + std::to_string(kDefaultScanEntries) + "; 0: never scanned)");
  app.add_flag("--classifier-no-hash", o.classifier_no_hash,
               "a policy whose rules all match the same fields the same way is scanned or put in a trie like any "
               "other, not hashed (for comparison; see doc/engine.md)");
  app.add_option("--flow-cache-entries", o.flow_cache_entries,
                 "an exact-match flow cache of this many entries (a power of two) in front of the classifier, as "
                 "tricolord's workers take it (default 0: none)");
  app.add_option("--change-at", o.changes,
                 "INDEX:COMMAND  a live change: the command (e.g. 'rule change web profile silver') applied before "
                 "packet INDEX (from 0), as tricolord applies one at its first burst under the new rule set (repeatable, "
                 "in packet order)");
  app.set_version_flag("--version", "tricolor-replay " TRICOLOR_VERSION);
  app.add_flag("--table", o.table, "print the per-rule table on stdout (the default when no output is asked for)");
  app.add_option("--demo", o.demo_dir,
                 "generate an example capture and policy into DIR, replay them with every output in DIR, print the table");
  auto* seconds = app.add_option("--demo-seconds", o.demo_seconds, "seconds of generated traffic for --demo")->check(CLI::Range(1, 600));
  auto* seed = app.add_option("--demo-seed", o.demo_seed, "seed of the generated traffic for --demo");
  CLI11_PARSE(app, argc, argv);

  if (!o.demo_dir.empty()) {
    // --demo chooses every file itself, in DIR: a file named beside it would be silently ignored.
    for (const auto* option : {policy, in, out, csv, json})
      if (option->count() != 0)
        usage_error("--demo DIR writes its own policy, capture and outputs into DIR; it cannot be combined with " +
                    option->get_name());
  } else {
    for (const auto* option : {seconds, seed})
      if (option->count() != 0) usage_error(option->get_name() + " changes the traffic of --demo; it needs --demo DIR");
    if (o.policy_path.empty() || o.capture_path.empty()) {
      std::cerr << app.help() << "\n";
      usage_error("--policy and --in are required (or --demo DIR)");
    }
  }
  try {
    return run_program(o);
  } catch (const std::bad_alloc&) {
    // Nothing here allocates in proportion to its input without a limit; if memory still runs out
    // (a tight ulimit), say so rather than abort.
    fail("out of memory (is the process limited by ulimit -v?)");
  }
}
