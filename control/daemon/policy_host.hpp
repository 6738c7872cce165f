#pragma once
// What the daemon's commands (daemon_commands.hpp) need of a dataplane to change its policy: the
// running policy, its rule set generation, and an update applied whole or refused with nothing
// changed. The DPDK engine is one (EnginePolicyHost); the XDP program is another (xdp_daemon.hpp).
// Called on the control thread only; nothing per packet goes through it.
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "dataplane/engine/engine.hpp"
#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

class PolicyHost {
 public:
  virtual ~PolicyHost() = default;
  virtual const dataplane::Policy& policy() const = 0;
  virtual std::uint64_t generation() const = 0;
  // Installs `policy` whole, or returns why not and leaves the running one as it was.
  virtual Expected<bool> update(const dataplane::Policy& policy) = 0;

  // A dataplane without the engine's key queries lists its keys here: each key and its meter's state
  // at its latest packet. None: not available (the engine's are read by DaemonCommands itself).
  struct HostKey {
    dataplane::MeterKey key{};
    std::array<std::uint64_t, 2> levels{};
    std::uint64_t last_tick = 0;
  };
  virtual std::optional<Expected<std::vector<HostKey>>> keys_of(std::size_t /*rule*/) const { return std::nullopt; }
};

class EnginePolicyHost final : public PolicyHost {
 public:
  explicit EnginePolicyHost(dataplane::Engine& engine) : engine_(engine) {}
  const dataplane::Policy& policy() const override { return engine_.policy(); }
  std::uint64_t generation() const override { return engine_.generation(); }
  Expected<bool> update(const dataplane::Policy& policy) override { return engine_.update(policy); }

 private:
  dataplane::Engine& engine_;
};

}  // namespace tricolor::control
