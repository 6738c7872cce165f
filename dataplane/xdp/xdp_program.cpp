#include "dataplane/xdp/xdp_program.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "dataplane/xdp/tricolor_xdp.skel.h"
#include "dataplane/xdp/xdp_sweep.hpp"

namespace tricolor::dataplane::xdp {
namespace {

Error system_error(const std::string& what, int error) {
  return Error{"xdp", what + ": " + std::strerror(error < 0 ? -error : error)};
}

// txdp_key_live as mapped: whole pages.
const std::size_t kKeyLiveBytes = [] {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (sizeof(txdp_key_live) * TXDP_MAX_RULES + page - 1) / page * page;
}();

// The verifier's log of a load, kept by libbpf in this buffer (bpf_object_open_opts.kernel_log_buf):
// libbpf loads at log level 0 (no log, no cost) and, when the kernel refuses a program, loads it again
// at level 1 into the buffer. Kernels from 6.4 keep the log's end when it overflows: the reason is
// there. Without a buffer of ours, libbpf would print the whole log to stderr, apart from the error.
constexpr std::size_t kVerifierLogBytes = 1u << 20;
constexpr std::size_t kVerifierLogLines = 12;  // of the end: the refused instruction, the reason, the totals
constexpr std::size_t kVerifierLogChars = 4000;

std::string log_end(const std::vector<char>& log) {
  std::string_view text(log.data(), ::strnlen(log.data(), log.size()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  // The last kVerifierLogLines lines: after as many newlines from the end, or the whole log.
  std::size_t start = 0;
  std::size_t at = text.size();
  for (std::size_t lines = 0; lines < kVerifierLogLines; ++lines) {
    const std::size_t newline = at == 0 ? std::string_view::npos : text.rfind('\n', at - 1);
    if (newline == std::string_view::npos) {
      start = 0;
      break;
    }
    start = newline + 1;
    at = newline;
  }
  text.remove_prefix(start);
  if (text.size() > kVerifierLogChars) text.remove_prefix(text.size() - kVerifierLogChars);
  return std::string(text);
}

// A failed load: with the kernel's log when it wrote one (a program or its BTF refused), else errno.
Error load_error(const std::string& what, int error, const std::vector<char>& log, const std::string& otherwise) {
  const std::string end = log_end(log);
  if (end.empty()) return system_error(what + otherwise, error);
  const int e = error < 0 ? -error : error;
  const std::string why = e == ENOSPC ? std::string("its log outgrew the buffer") : std::strerror(e);
  return Error{"xdp", what + ": the kernel refused it (" + why + "); the end of the verifier's log:\n" + end};
}

int cpus() {
  const int n = libbpf_num_possible_cpus();
  return n > 0 ? n : 1;
}

}  // namespace

Expected<std::unique_ptr<XdpProgram>> XdpProgram::load(const LoadOptions& options) {
  std::vector<char> log(kVerifierLogBytes, '\0');
  LIBBPF_OPTS(bpf_object_open_opts, open_options, .kernel_log_buf = log.data(), .kernel_log_size = log.size());
  tricolor_xdp* skeleton = tricolor_xdp__open_opts(&open_options);
  if (skeleton == nullptr) return system_error("opening the XDP program", errno);
  skeleton->rodata->test_clock = options.test_clock ? 1 : 0;
  if (int e = bpf_map__set_max_entries(skeleton->maps.txdp_keys, options.max_keys); e != 0) {
    tricolor_xdp__destroy(skeleton);
    return system_error("sizing the key table", e);
  }
  if (int e = tricolor_xdp__load(skeleton); e != 0) {
    tricolor_xdp__destroy(skeleton);
    return load_error("loading the XDP program", e, log, " (root, or CAP_BPF and CAP_NET_ADMIN, is needed)");
  }
  void* live = ::mmap(nullptr, kKeyLiveBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                      bpf_map__fd(skeleton->maps.txdp_key_live), 0);
  if (live == MAP_FAILED) {
    const int e = errno;
    tricolor_xdp__destroy(skeleton);
    return system_error("mapping the key counts", e);
  }
  return std::unique_ptr<XdpProgram>(new XdpProgram(skeleton, options, static_cast<txdp_key_live*>(live)));
}

XdpProgram::~XdpProgram() {
  ::munmap(key_live_, kKeyLiveBytes);
  tricolor_xdp__destroy(skeleton_);
}

int XdpProgram::program_fd() const noexcept { return bpf_program__fd(skeleton_->progs.tricolor_xdp); }

Expected<bool> XdpProgram::install(const RuleSetImage& image) {
  std::uint64_t keys = 0;
  for (const txdp_rule& r : image.rules) keys += r.key_kind != TXDP_KEY_NONE ? r.key_capacity : 0;
  if (keys > options_.max_keys)
    return Error{"capacity", "the per-key rules' capacities add up to " + std::to_string(keys) +
                                 " keys; the XDP program was loaded with room for " +
                                 std::to_string(options_.max_keys)};
  // Slots the live image does not use are past the swap's grace (the caller's): their keys and
  // counters go now, before a new rule can take one of them.
  if (auto cleared = clear_retired(); !cleared) return cleared.error();
  const std::uint32_t idle = has_image_ ? 1 - live_half_ : live_half_;
  const int rules_fd = bpf_map__fd(skeleton_->maps.txdp_rules);
  for (std::uint32_t i = 0; i < image.rules.size(); ++i) {
    const std::uint32_t index = idle * TXDP_MAX_RULES + i;
    if (bpf_map_update_elem(rules_fd, &index, &image.rules[i], BPF_ANY) != 0) return system_error("writing a rule", errno);
  }
  // Meters of slots new to this image start full, at tick 0 (the engine's "full, at any tick").
  const int aggregates_fd = bpf_map__fd(skeleton_->maps.txdp_aggregates);
  const int parents_fd = bpf_map__fd(skeleton_->maps.txdp_parents);
  const int live_fd = bpf_map__fd(skeleton_->maps.txdp_key_live);
  const auto live_slots = slots_of(has_image_ ? &image_ : nullptr);
  for (const txdp_rule& r : image.rules) {
    const std::uint32_t slot = r.slot;
    if (live_slots.test(slot)) continue;  // kept: its meters carry over
    txdp_meter meter{};
    meter.version = r.history.version;
    meter.state = {{r.profile.size[0], r.profile.size[1]}, 0};
    if (bpf_map_update_elem(aggregates_fd, &slot, &meter, BPF_ANY) != 0) return system_error("writing a meter", errno);
    meter.version = r.parent_history.version;
    meter.state = {{r.parent_profile.size[0], r.parent_profile.size[1]}, 0};
    if (bpf_map_update_elem(parents_fd, &slot, &meter, BPF_ANY) != 0) return system_error("writing a meter", errno);
    const txdp_key_live zero{};
    if (bpf_map_update_elem(live_fd, &slot, &zero, BPF_ANY) != 0) return system_error("writing a key count", errno);
  }
  used_ |= slots_of(&image);
  const std::uint32_t set_index = idle;
  if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.txdp_sets), &set_index, &image.set, BPF_ANY) != 0)
    return system_error("writing the rule set", errno);
  // The swap: one update of one word, which every packet reads once.
  const std::uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.txdp_current), &zero, &idle, BPF_ANY) != 0)
    return system_error("publishing the rule set", errno);
  live_half_ = idle;
  image_ = image;
  has_image_ = true;
  return true;
}

std::bitset<TXDP_MAX_RULES> XdpProgram::slots_of(const RuleSetImage* image) noexcept {
  std::bitset<TXDP_MAX_RULES> slots;
  if (image != nullptr)
    for (const txdp_rule& r : image->rules) slots.set(r.slot);
  return slots;
}

Expected<std::uint64_t> XdpProgram::clear_retired() {
  const auto retired = used_ & ~slots_of(has_image_ ? &image_ : nullptr);
  if (retired.none()) return std::uint64_t{0};
  // Their keys: one walk of the table, then the deletes (deleting while walking restarts the walk).
  const int fd = bpf_map__fd(skeleton_->maps.txdp_keys);
  std::vector<txdp_key> gone;
  txdp_key at{}, next{};
  const void* previous = nullptr;
  while (bpf_map_get_next_key(fd, previous, &next) == 0) {
    at = next;
    previous = &at;
    if (at.slot < TXDP_MAX_RULES && retired.test(at.slot)) gone.push_back(at);
  }
  std::uint64_t deleted = 0;
  for (const txdp_key& key : gone) deleted += bpf_map_delete_elem(fd, &key) == 0;
  // Their key counts and counters, zero on every CPU.
  const std::vector<txdp_rule_counters> zero_counters(static_cast<std::size_t>(cpus()));
  const txdp_key_live zero_live{};
  for (std::uint32_t slot = 0; slot < TXDP_MAX_RULES; ++slot) {
    if (!retired.test(slot)) continue;
    if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.txdp_key_live), &slot, &zero_live, BPF_ANY) != 0)
      return system_error("clearing a key count", errno);
    if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.txdp_counters), &slot, zero_counters.data(), BPF_ANY) != 0)
      return system_error("clearing counters", errno);
  }
  used_ &= ~retired;
  return deleted;
}

Expected<bool> XdpProgram::set_test_clock(std::uint64_t now) {
  const std::uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.txdp_test_clock), &zero, &now, BPF_ANY) != 0)
    return system_error("setting the test clock", errno);
  return true;
}

Expected<TestRun> XdpProgram::test_run(std::span<const std::uint8_t> frame) {
  TestRun run;
  run.frame.resize(frame.size() + 256);
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = run.frame.data(),
              .data_size_in = static_cast<__u32>(frame.size()), .data_size_out = static_cast<__u32>(run.frame.size()),
              .repeat = 1);
  if (bpf_prog_test_run_opts(program_fd(), &opts) != 0) return system_error("BPF_PROG_TEST_RUN", errno);
  run.verdict = opts.retval;
  run.frame.resize(opts.data_size_out);
  return run;
}

Expected<RepeatedRun> XdpProgram::test_run_repeated(std::span<const std::uint8_t> frame, std::uint32_t repeat) const {
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_size_in = static_cast<__u32>(frame.size()),
              .repeat = static_cast<int>(repeat));
  if (bpf_prog_test_run_opts(program_fd(), &opts) != 0) return system_error("BPF_PROG_TEST_RUN", errno);
  return RepeatedRun{opts.retval, opts.duration};
}

Expected<std::vector<txdp_rule_counters>> XdpProgram::rule_counters_per_cpu(std::uint32_t slot) const {
  std::vector<txdp_rule_counters> per_cpu(static_cast<std::size_t>(cpus()));
  if (bpf_map_lookup_elem(bpf_map__fd(skeleton_->maps.txdp_counters), &slot, per_cpu.data()) != 0)
    return system_error("reading counters", errno);
  return per_cpu;
}

Expected<txdp_rule_counters> XdpProgram::rule_counters(std::uint32_t slot) const {
  auto per_cpu = rule_counters_per_cpu(slot);
  if (!per_cpu) return per_cpu.error();
  txdp_rule_counters sum{};
  bool metered = false;
  for (const auto& c : *per_cpu) {
    if (c.packets[0] + c.packets[1] + c.packets[2] != 0) {  // the earliest first and the latest last
      sum.first_tick = metered ? std::min(sum.first_tick, c.first_tick) : c.first_tick;
      sum.last_tick = metered ? std::max(sum.last_tick, c.last_tick) : c.last_tick;
      metered = true;
    }
    for (int k = 0; k < 3; ++k) sum.packets[k] += c.packets[k], sum.bytes[k] += c.bytes[k];
    sum.dropped_packets += c.dropped_packets;
    sum.dropped_bytes += c.dropped_bytes;
    sum.keys_created += c.keys_created;
    sum.keys_renewed += c.keys_renewed;
    sum.table_full += c.table_full;
  }
  return sum;
}

Expected<txdp_default_counters> XdpProgram::default_counters() const {
  std::vector<txdp_default_counters> per_cpu(static_cast<std::size_t>(cpus()));
  const std::uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skeleton_->maps.txdp_defaults), &zero, per_cpu.data()) != 0)
    return system_error("reading counters", errno);
  txdp_default_counters sum{};
  for (const auto& c : per_cpu) {
    sum.packets += c.packets;
    sum.bytes += c.bytes;
    sum.non_ip += c.non_ip;
    sum.no_match += c.no_match;
    for (int e = 0; e < TXDP_MALFORMED_SLOTS; ++e) sum.malformed[e] += c.malformed[e];
    sum.dropped_packets += c.dropped_packets;
    sum.dropped_bytes += c.dropped_bytes;
  }
  return sum;
}

std::uint64_t XdpProgram::live_keys(std::uint32_t slot) const {
  txdp_key_live live{};
  bpf_map_lookup_elem(bpf_map__fd(skeleton_->maps.txdp_key_live), &slot, &live);
  return live.count;
}

Expected<std::vector<XdpProgram::LiveKey>> XdpProgram::keys_of(std::uint32_t slot) const {
  const int fd = bpf_map__fd(skeleton_->maps.txdp_keys);
  std::vector<LiveKey> keys;
  txdp_key at{};
  txdp_key next{};
  const void* previous = nullptr;  // null: the first key
  while (bpf_map_get_next_key(fd, previous, &next) == 0) {
    at = next;
    previous = &at;
    if (at.slot != slot) continue;
    txdp_keyed_meter value{};
    if (bpf_map_lookup_elem_flags(fd, &at, &value, BPF_F_LOCK) != 0) {
      if (errno == ENOENT) continue;  // deleted since
      return system_error("reading a key", errno);
    }
    LiveKey live;
    std::memcpy(live.key.data(), at.key, sizeof at.key);
    live.state = value.state;
    keys.push_back(live);
  }
  return keys;
}

Expected<std::uint64_t> XdpProgram::sweep_keys(std::uint32_t slot, std::uint64_t now, std::uint64_t idle_ticks) {
  if (idle_ticks == 0 || slot >= TXDP_MAX_RULES) return std::uint64_t{0};
  const int fd = bpf_map__fd(skeleton_->maps.txdp_keys);
  // The keys first, then the deletes: deleting while walking would restart the walk.
  std::vector<txdp_key> due;
  txdp_key at{};
  txdp_key next{};
  const void* previous = nullptr;
  while (bpf_map_get_next_key(fd, previous, &next) == 0) {
    at = next;
    previous = &at;
    if (at.slot != slot) continue;
    txdp_keyed_meter value{};
    if (bpf_map_lookup_elem_flags(fd, &at, &value, BPF_F_LOCK) != 0) continue;  // deleted since
    if (sweep_due(value.state.last, now, idle_ticks)) due.push_back(at);
  }
  std::uint64_t deleted = 0;
  for (const txdp_key& key : due) {
    if (bpf_map_delete_elem(fd, &key) != 0) continue;  // gone already
    std::atomic_ref<__u64>(key_live_[slot].count).fetch_sub(1, std::memory_order_relaxed);
    ++deleted;
  }
  return deleted;
}

Expected<bool> check_object_file(const std::string& path) {
  std::vector<char> log(kVerifierLogBytes, '\0');
  LIBBPF_OPTS(bpf_object_open_opts, open_options, .kernel_log_buf = log.data(), .kernel_log_size = log.size());
  std::unique_ptr<bpf_object, decltype(&bpf_object__close)> object(bpf_object__open_file(path.c_str(), &open_options),
                                                                    &bpf_object__close);
  if (object == nullptr) return system_error("opening the BPF object " + path, errno);
  if (int e = bpf_object__load(object.get()); e != 0) return load_error("loading the BPF object " + path, e, log, "");
  return true;
}

}  // namespace tricolor::dataplane::xdp
