#pragma once
// tricolord --xdp (issue 24, second part): the policy runs as the XDP program (dataplane/xdp/) on
// kernel interfaces instead of the DPDK engine on DPDK ports. This is the control side's part: the
// program loaded and attached by bpf_link (the kernel detaches it when the daemon's last descriptor
// goes, after SIGKILL too; nothing is pinned), the policy changes translated and swapped in whole, and
// the counters read back in the DPDK daemon's snapshot form, so that `stats`, Prometheus and the final
// report are the same code.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "control/daemon/policy_host.hpp"
#include "control/daemon/tricolord_options.hpp"
#include "dataplane/dpdk/daemon_report.hpp"
#include "dataplane/engine/policy.hpp"
#include "dataplane/xdp/xdp_program.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

// The entries preallocated in the key table for `policy`: its per-key capacities added up, at least
// kMinXdpKeys (so that a later change may add a small per-key rule). Refused beyond kMaxXdpKeys.
inline constexpr std::uint64_t kMinXdpKeys = 1024;
inline constexpr std::uint64_t kMaxXdpKeys = 1u << 22;
Expected<std::uint32_t> xdp_key_budget(const dataplane::Policy& policy);

// An interface and what its XDP program is, as the kernel says.
struct XdpAttachment {
  std::string interface;
  unsigned ifindex = 0;
  int link_fd = -1;  // the bpf_link: closing it detaches
};

class XdpDataplane final : public PolicyHost {
 public:
  // Translates `policy` (refused, naming the rule, before anything is loaded), loads the program,
  // installs the rule set and attaches it to each interface; on any error what was attached is
  // detached again.
  static Expected<std::unique_ptr<XdpDataplane>> start(const dataplane::Policy& policy,
                                                       const std::vector<std::string>& interfaces, XdpMode mode,
                                                       bool force);
  ~XdpDataplane() override;  // detaches (closes the links), then unloads
  XdpDataplane(const XdpDataplane&) = delete;
  XdpDataplane& operator=(const XdpDataplane&) = delete;

  const dataplane::Policy& policy() const override { return policy_; }
  std::uint64_t generation() const override { return generation_; }
  Expected<bool> update(const dataplane::Policy& policy) override;
  std::optional<Expected<std::vector<HostKey>>> keys_of(std::size_t rule) const override;

  // The control side's sweep: each per-key rule's keys idle past its timeout (and a margin) deleted,
  // their places given back. Returns how many, or the first error.
  Expected<std::uint64_t> sweep();

  // The counters, summed over the CPUs, as the DPDK daemon's snapshot (no ports, no workers).
  dataplane::DaemonSnapshot snapshot(double elapsed_s, unsigned sections) const;
  const std::vector<XdpAttachment>& attachments() const noexcept { return attachments_; }

 private:
  XdpDataplane(std::unique_ptr<dataplane::xdp::XdpProgram> program, dataplane::Policy policy)
      : program_(std::move(program)), policy_(std::move(policy)) {}
  Expected<bool> attach(const std::string& interface, XdpMode mode, bool force);

  std::unique_ptr<dataplane::xdp::XdpProgram> program_;
  dataplane::Policy policy_;
  std::uint64_t generation_ = 1;
  std::chrono::steady_clock::time_point last_swap_{};
  std::vector<XdpAttachment> attachments_;
  // The program keeps a rule's meters, keys and counters by its slot, which follows its name
  // (xdp_policy.hpp's translate): the rule at position i is in slot slot_of(i).
  std::uint32_t slot_of(std::size_t position) const noexcept { return program_->installed()->slot_of(position); }
};

}  // namespace tricolor::control
