#include "control/daemon/xdp_daemon.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <thread>

#include "policer/quote.hpp"

namespace tricolor::control {
namespace {

using dataplane::Policy;
using dataplane::xdp::RuleSetImage;

// An RCU grace period, generously: a packet that read the old half of the rule set before a swap has
// finished with it after this, so that half may be written again (dataplane/xdp/README.md).
constexpr auto kSwapGrace = std::chrono::milliseconds(50);

std::string errno_text(int error) { return std::strerror(error < 0 ? -error : error); }

// bpf_ktime_get_ns's clock: CLOCK_MONOTONIC in nanoseconds. A change takes effect at this tick.
std::uint64_t kernel_now_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(now.tv_nsec);
}

// The name of the XDP program with this id, or "" when it cannot be read.
std::string program_name(std::uint32_t id) {
  const int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return {};
  bpf_prog_info info{};
  std::uint32_t size = sizeof info;
  std::string name;
  if (bpf_obj_get_info_by_fd(fd, &info, &size) == 0) name = info.name;
  ::close(fd);
  return name;
}

}  // namespace

Expected<std::uint32_t> xdp_key_budget(const Policy& policy) {
  std::uint64_t keys = 0;
  for (const dataplane::Rule& rule : policy.rules)
    if (rule.per_key.kind != dataplane::KeyKind::none) keys += rule.per_key.capacity;
  if (keys > kMaxXdpKeys)
    return Error{"capacity", "the per-key rules' capacities add up to " + std::to_string(keys) +
                                 " keys; the XDP dataplane preallocates its key table and takes at most " +
                                 std::to_string(kMaxXdpKeys) + " (lower `capacity` in the rules)"};
  return static_cast<std::uint32_t>(std::max(keys, kMinXdpKeys));
}

Expected<std::unique_ptr<XdpDataplane>> XdpDataplane::start(const Policy& policy,
                                                            const std::vector<std::string>& interfaces, XdpMode mode,
                                                            bool force) {
  auto image = dataplane::xdp::translate(policy);
  if (!image) return image.error();
  auto keys = xdp_key_budget(policy);
  if (!keys) return keys.error();
  dataplane::xdp::LoadOptions load;
  load.max_keys = *keys;
  auto program = dataplane::xdp::XdpProgram::load(load);
  if (!program) return program.error();
  if (auto installed = (*program)->install(*image); !installed) return installed.error();
  std::unique_ptr<XdpDataplane> self(new XdpDataplane(std::move(*program), policy));
  self->last_swap_ = std::chrono::steady_clock::now();
  for (const std::string& interface : interfaces)
    if (auto attached = self->attach(interface, mode, force); !attached) return attached.error();  // ~ detaches
  return self;
}

Expected<bool> XdpDataplane::attach(const std::string& interface, XdpMode mode, bool force) {
  const std::string where = "--xdp " + quote(interface);
  const unsigned ifindex = ::if_nametoindex(interface.c_str());
  if (ifindex == 0) return Error{"xdp", where + ": no such interface"};
  // A program already there: another tricolord's (by its link), or some other tool's.
  LIBBPF_OPTS(bpf_xdp_query_opts, query);
  if (int e = bpf_xdp_query(static_cast<int>(ifindex), 0, &query); e != 0)
    return Error{"xdp", where + ": cannot ask the kernel which XDP program it carries: " + errno_text(e)};
  if (query.prog_id != 0) {
    const std::string name = program_name(query.prog_id);
    const std::string what = "carries XDP program id " + std::to_string(query.prog_id) +
                             (name.empty() ? "" : " (" + quote(name) + ")");
    if (!force)
      return Error{"xdp", where + ": " + what + (name == "tricolor_xdp" ? ": another tricolord runs on it" : "") +
                              "; --xdp-force replaces a program another tool attached"};
    // Only a program attached without a link can be detached from here; a link (another tricolord's)
    // holds its interface until its owner goes.
    const std::uint32_t flags = query.attach_mode == XDP_ATTACHED_SKB ? XDP_FLAGS_SKB_MODE
                                : query.attach_mode == XDP_ATTACHED_DRV ? XDP_FLAGS_DRV_MODE
                                                                        : 0;
    if (int e = bpf_xdp_detach(static_cast<int>(ifindex), flags, nullptr); e != 0)
      return Error{"xdp", where + ": " + what + " and it cannot be detached (" + errno_text(e) +
                              "; a program attached by a link, e.g. another tricolord's, stays until its owner ends)"};
  }
  LIBBPF_OPTS(bpf_link_create_opts, link_options);
  link_options.flags = mode == XdpMode::skb ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
  const int link = bpf_link_create(program_->program_fd(), static_cast<int>(ifindex), BPF_XDP, &link_options);
  if (link < 0) {
    const int e = errno;
    std::string message = where + ": cannot attach the XDP program: " + errno_text(e);
    if (mode == XdpMode::native && (e == EOPNOTSUPP || e == EINVAL))
      message += " (its driver has no native XDP: --xdp-mode skb uses the kernel's generic XDP, slower)";
    else if (e == EBUSY || e == EEXIST)
      message += " (another XDP program is attached to it)";
    return Error{"xdp", message};
  }
  attachments_.push_back({interface, ifindex, link});
  return true;
}

XdpDataplane::~XdpDataplane() {
  for (XdpAttachment& a : attachments_) ::close(a.link_fd);  // detached: the link was never pinned
  attachments_.clear();
}

Expected<bool> XdpDataplane::update(const Policy& next) {
  if (auto keys = xdp_key_budget(next); !keys) return keys.error();
  // A rate change keeps the meters' levels: translate() gives the changed rules their next profile
  // version, taking effect now on the program's clock (policer::change_profile at the next check).
  auto image = dataplane::xdp::translate(next, program_->installed(), kernel_now_ns());
  if (!image) return image.error();
  // The half about to be written was live until the previous swap: wait until no packet reads it.
  std::this_thread::sleep_until(last_swap_ + kSwapGrace);
  if (auto installed = program_->install(*image); !installed) return installed.error();
  last_swap_ = std::chrono::steady_clock::now();
  policy_ = next;
  ++generation_;
  return true;
}

std::optional<Expected<std::vector<PolicyHost::HostKey>>> XdpDataplane::keys_of(std::size_t rule) const {
  auto live = program_->keys_of(slot_of(rule));
  if (!live) return Expected<std::vector<HostKey>>(live.error());
  std::vector<HostKey> keys;
  for (const auto& k : *live) {
    HostKey h;
    std::copy(k.key.begin(), k.key.end(), h.key.begin());
    h.levels = {k.state.level[0], k.state.level[1]};
    h.last_tick = k.state.last;
    keys.push_back(h);
  }
  return Expected<std::vector<HostKey>>(std::move(keys));
}

Expected<std::uint64_t> XdpDataplane::sweep() {
  const RuleSetImage* image = program_->installed();
  if (image == nullptr) return std::uint64_t{0};
  std::uint64_t deleted = 0;
  // The keys of rules the last change deleted go once no packet can read them (the swap's grace),
  // so that their places in the key table are free for the rules that remain.
  if (std::chrono::steady_clock::now() >= last_swap_ + kSwapGrace) {
    auto cleared = program_->clear_retired();
    if (!cleared) return cleared.error();
    deleted += *cleared;
  }
  const std::uint64_t now = kernel_now_ns();
  for (const txdp_rule& rule : image->rules) {
    if (rule.key_kind == TXDP_KEY_NONE || rule.idle_ticks == 0) continue;
    auto swept = program_->sweep_keys(rule.slot, now, rule.idle_ticks);
    if (!swept) return swept.error();
    deleted += *swept;
  }
  return deleted;
}

dataplane::DaemonSnapshot XdpDataplane::snapshot(double elapsed_s, unsigned sections) const {
  using namespace dataplane;
  DaemonSnapshot s;
  s.elapsed_s = elapsed_s;
  s.tick_hz = xdp::kHz;
  s.generation = generation_;
  if ((sections & kReportRules) != 0)
    for (std::size_t position = 0; position < policy_.rules.size(); ++position) {
      const Rule& rule = policy_.rules[position];
      const std::uint32_t slot = slot_of(position);
      RuleSnapshot r;
      r.name = rule.name;
      r.keyed = rule.per_key.kind != KeyKind::none;
      r.placement = Placement::shared;  // one table for all CPUs
      r.worker_capacity = r.keyed ? rule.per_key.capacity : 0;
      if (auto c = program_->rule_counters(slot)) {
        for (int k = 0; k < 3; ++k) r.counters.packets[k] = c->packets[k], r.counters.bytes[k] = c->bytes[k];
        r.counters.dropped_packets = c->dropped_packets;
        r.counters.dropped_bytes = c->dropped_bytes;
        r.counters.keys_created = c->keys_created;
        r.counters.keys_renewed = c->keys_renewed;
        r.counters.table_full = c->table_full;
        r.counters.metered = c->packets[0] + c->packets[1] + c->packets[2] != 0;
        r.counters.first_tick = c->first_tick;
        r.counters.last_tick = c->last_tick;
      }
      r.live_keys = r.keyed ? program_->live_keys(slot) : 0;
      s.rules.push_back(std::move(r));
    }
  if ((sections & kReportDefault) != 0)
    if (auto d = program_->default_counters()) {
      s.defaults.packets = d->packets;
      s.defaults.bytes = d->bytes;
      s.defaults.non_ip = d->non_ip;
      s.defaults.no_match = d->no_match;
      for (std::size_t e = 0; e < s.defaults.malformed.size(); ++e) s.defaults.malformed[e] = d->malformed[e];
      s.defaults.dropped_packets = d->dropped_packets;
      s.defaults.dropped_bytes = d->dropped_bytes;
    }
  return s;
}

}  // namespace tricolor::control
