#pragma once
// The XDP program, loaded through its libbpf skeleton (tricolor_xdp.skel.h, made at build time by
// bpftool from tricolor_xdp.bpf.c), and its maps as the control side writes and reads them. RAII:
// the program and its maps go when the object does. Not attached to any interface here (the daemon's
// part, issue 24 section 2): the tests run it with BPF_PROG_TEST_RUN.
#include <array>
#include <bitset>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/xdp/xdp_maps.h"
#include "dataplane/xdp/xdp_policy.hpp"
#include "policer/expected.hpp"

struct tricolor_xdp;  // the skeleton

namespace tricolor::dataplane::xdp {

struct LoadOptions {
  // The clock is txdp_test_clock[0], which set_test_clock() writes, instead of bpf_ktime_get_ns.
  bool test_clock = false;
  // Entries preallocated for per-key meters, all rules together; a policy whose capacities add up to
  // more is refused.
  std::uint32_t max_keys = 1u << 16;
};

// What one BPF_PROG_TEST_RUN returned: the XDP verdict and the frame as the program left it.
struct TestRun {
  std::uint32_t verdict = 0;  // XDP_PASS, XDP_DROP, ...
  std::vector<std::uint8_t> frame;
};

// What BPF_PROG_TEST_RUN with `repeat` returned: the last run's verdict and the kernel's mean time
// per run.
struct RepeatedRun {
  std::uint32_t verdict = 0;
  std::uint32_t mean_ns = 0;
};

class XdpProgram {
 public:
  // A program the kernel refuses fails with the end of the verifier's log in the error's message.
  static Expected<std::unique_ptr<XdpProgram>> load(const LoadOptions& options);
  ~XdpProgram();
  XdpProgram(const XdpProgram&) = delete;
  XdpProgram& operator=(const XdpProgram&) = delete;

  // Writes `image` into the half of the rule set that is not live, then makes it live by one map
  // update (txdp_current). A rule new to its slot gets its meters full and its key count zero. The
  // slots of rules an earlier change deleted are cleared first (clear_retired): the caller calls
  // install only once no packet can still read the set before the live one (the swap's grace).
  Expected<bool> install(const RuleSetImage& image);
  // Deletes the keys and zeroes the key counts and counters of the slots that rules used and the live
  // image does not: the rules deleted by the last change, once no packet reads the set they were in
  // (the caller's to know: the swap's grace). Returns the keys deleted.
  Expected<std::uint64_t> clear_retired();
  const RuleSetImage* installed() const noexcept { return has_image_ ? &image_ : nullptr; }

  Expected<bool> set_test_clock(std::uint64_t now);
  Expected<TestRun> test_run(std::span<const std::uint8_t> frame);
  // The frame run `repeat` times in one BPF_PROG_TEST_RUN, on the calling thread's CPU; the frame as
  // the program leaves it is not returned (nor reset between runs). Several threads may call it at
  // once: the program's shared meters are then contended as by several RX queues.
  Expected<RepeatedRun> test_run_repeated(std::span<const std::uint8_t> frame, std::uint32_t repeat) const;

  // Counters summed over the CPUs.
  Expected<txdp_rule_counters> rule_counters(std::uint32_t slot) const;
  Expected<txdp_default_counters> default_counters() const;
  // One entry per possible CPU, not summed.
  Expected<std::vector<txdp_rule_counters>> rule_counters_per_cpu(std::uint32_t slot) const;
  std::uint64_t live_keys(std::uint32_t slot) const;

  // The per-key meters of `slot` now, each read under its spin lock (BPF_F_LOCK). A key deleted or
  // added during the walk may be missed or seen; each entry read is whole.
  struct LiveKey {
    std::array<std::uint8_t, TXDP_KEY_SIZE> key{};
    txdp_state state{};
  };
  Expected<std::vector<LiveKey>> keys_of(std::uint32_t slot) const;

  // Deletes the keys of `slot` that sweep_due() says are idle at `now` and gives their places in the
  // rule's capacity back; returns how many. A packet that renews a key between the sweep's read and
  // its delete loses that renewal: its next packet creates the key afresh, as after an expiry.
  Expected<std::uint64_t> sweep_keys(std::uint32_t slot, std::uint64_t now, std::uint64_t idle_ticks);

  int program_fd() const noexcept;

 private:
  explicit XdpProgram(tricolor_xdp* skeleton, const LoadOptions& options, txdp_key_live* live)
      : skeleton_(skeleton), options_(options), key_live_(live) {}
  tricolor_xdp* skeleton_;
  LoadOptions options_;
  txdp_key_live* key_live_;  // txdp_key_live, mapped (BPF_F_MMAPABLE): the sweep's atomic decrements
  static std::bitset<TXDP_MAX_RULES> slots_of(const RuleSetImage* image) noexcept;
  std::uint32_t live_half_ = 0;
  bool has_image_ = false;
  RuleSetImage image_;
  std::bitset<TXDP_MAX_RULES> used_;  // slots a rule has used since they were last cleared
};

// Loads the BPF object file at `path` with the open options XdpProgram::load uses (the verifier's log
// kept, and its end reported when the kernel refuses a program), then unloads it. What a refused
// program says, tested on a deliberately broken object; also a check of any object file.
Expected<bool> check_object_file(const std::string& path);

}  // namespace tricolor::dataplane::xdp
