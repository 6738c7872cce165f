#pragma once
// What tricolord does with a control socket request (control_server.hpp), on its control side: the
// command language on the running policy, applied whole or not at all, and the daemon's own commands.
//
//   ping                    "pong"
//   version                 the daemon's version, the policy's source and when it was loaded
//   names                   the rules', profiles' and color maps' names (the shell completes them)
//   stats [rules | rule NAME | default | ports | workers]
//                           the counters, all or one block (with "json": the same object as --json
//                           prints, or its part); since the latest `reset counters`
//   stats prometheus        every counter in Prometheus's text format, as the metrics listener's
//                           /metrics serves it: from the daemon's start (`reset counters` aside)
//   reset counters          what `stats` reports starts again from zero (the daemon's own counters, and
//                           its final report, keep counting from the start, as SNMP counters do)
//   key list RULE [top N | all] [by ORDER]
//                           a per-key rule's live keys, the top N (10) by ORDER (red-bytes), each with
//                           its worker and counters by color since the key was created
//   key show RULE KEY       one key (as `key list` prints it, or any address inside its prefix): its
//                           worker, its buckets' levels at its latest packet, its counters
//   load (text inline)      a whole policy: loaded, then installed, or nothing changes
//   reload                  the daemon's own policy file (--policy) read again and installed as `load`
//                           installs a policy, or nothing changes (SIGHUP does the same)
//   save                    the running policy's text, as `show` prints it (it loads back to the same
//                           state), and its counts in "result": tricolorctl writes it to the file the
//                           operator names, as that operator; the daemon writes no file
//   any language line       profile/color-map/rule add, change, delete, list, show ...
//
// A command that changes the policy is run on a copy; the copy is installed (Engine::update: a new
// rule set published by RCU, the workers never paused, meters keeping their levels as the README's
// live-change rule says); only if both succeed does it become the running policy. An error names the
// token at fault and its column in the line. Every accepted change and every refused one goes to the
// audit log with the peer's uid and pid.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "control/daemon/control_server.hpp"
#include "control/daemon/policy_host.hpp"
#include "control/telemetry/prometheus.hpp"
#include "control/daemon/protocol.hpp"
#include "dataplane/dpdk/daemon_report.hpp"
#include "dataplane/engine/engine.hpp"
#include "dataplane/engine/policy.hpp"

namespace tricolor::control {

class DaemonCommands {
 public:
  using Log = std::function<void(const std::string& line)>;
  // The counters now: the blocks asked for (dataplane::ReportSection), or all.
  using Snapshot = std::function<dataplane::DaemonSnapshot(unsigned sections)>;

  // policy_path: the daemon's policy file, which `reload` reads again.
  DaemonCommands(dataplane::Engine& engine, std::string policy_path, Log audit, Snapshot snapshot);
  // Over another dataplane (XDP): `key list` and `key show` are refused, saying why.
  DaemonCommands(PolicyHost& host, std::string policy_path, Log audit, Snapshot snapshot);

  protocol::Reply handle(const protocol::Request& request, const Peer& peer);

  // The policy file read again and installed whole, or nothing changes: for `reload` and SIGHUP. `by`
  // says who asked, for the audit log ("uid 0 pid 42", "SIGHUP"). The reply's output says what was
  // done; its error, what was wrong (the file's line and token).
  protocol::Reply reload(const std::string& by);

  // The version, the start, and when the running policy was installed (the metrics' facts).
  DaemonFacts facts() const;

 private:
  protocol::Reply install(dataplane::Policy next, const std::string& what, const std::string& by);
  protocol::Reply refuse(const std::string& line, const Error& error, const std::string& what, const std::string& by);
  protocol::Reply save() const;
  std::string source_of_file() const;  // "file '/etc/tricolor/policy'"
  protocol::Reply stats(const std::string& line, bool json);
  protocol::Reply keys(const std::string& line, bool json);
  protocol::Reply names(bool json) const;
  protocol::Reply host_keys(const std::string& line, std::size_t rule, bool json);

  DaemonCommands(std::unique_ptr<PolicyHost> own, dataplane::Engine* engine, std::string policy_path, Log audit,
                 Snapshot snapshot, PolicyHost* host = nullptr);

  std::unique_ptr<PolicyHost> own_host_;  // the engine's adapter, when constructed over the engine
  PolicyHost& host_;                      // the running policy and its updates
  dataplane::Engine* engine_;             // the key queries' engine; null over the XDP dataplane
  std::string policy_path_;  // the daemon's policy file
  std::string source_;       // where the running policy came from
  std::chrono::system_clock::time_point started_at_;
  std::chrono::system_clock::time_point loaded_at_;  // the running policy's installation
  Log audit_;
  Snapshot snapshot_;
  std::optional<dataplane::DaemonSnapshot> baseline_;  // taken by `reset counters`
  std::chrono::system_clock::time_point reset_at_;
};

}  // namespace tricolor::control
