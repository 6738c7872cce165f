#pragma once
// The service manager's notification protocol (sd_notify(3), "Type=notify"), spoken without libsystemd:
// one datagram of newline-separated KEY=VALUE lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a
// path, or '@' for the abstract namespace). systemd then knows when tricolord is ready (READY=1), what
// it is doing (STATUS=), that it is reloading (RELOADING=1 then READY=1: Debian 12's systemd 252 has no
// Type=notify-reload, so the daemon says both itself) or stopping (STOPPING=1), and that its control
// loop is alive (WATCHDOG=1 at half of $WATCHDOG_USEC, when the unit sets WatchdogSec=).
//
// Without $NOTIFY_SOCKET (not under systemd) every call does nothing. A datagram that cannot be sent
// is said once on stderr and never stops the daemon: the service manager is a listener, not a master.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tricolor::control {

class ServiceNotifier {
 public:
  // From the environment: $NOTIFY_SOCKET, and $WATCHDOG_USEC (honoured only if $WATCHDOG_PID is unset
  // or this process's). Both are removed from the environment, as sd_notify's unset_environment does,
  // so that nothing this process starts talks to the service manager in its name.
  static ServiceNotifier from_environment();

  ServiceNotifier() = default;  // notifies nobody
  ServiceNotifier(ServiceNotifier&&) noexcept;
  ServiceNotifier& operator=(ServiceNotifier&&) noexcept;
  ~ServiceNotifier();

  bool enabled() const noexcept { return fd_ >= 0; }
  // The interval between two watchdog pings (half the unit's WatchdogSec=), if it asked for them.
  std::optional<std::chrono::microseconds> watchdog_interval() const noexcept { return watchdog_interval_; }

  void ready(std::string_view status) { send("READY=1\nSTATUS=" + one_line(status)); }
  void status(std::string_view status) { send("STATUS=" + one_line(status)); }
  // RELOADING=1 with the monotonic time in microseconds, as systemd 253's notify-reload expects too.
  void reloading(std::string_view status);
  void stopping(std::string_view status) { send("STOPPING=1\nSTATUS=" + one_line(status)); }
  // WATCHDOG=1 if the interval has passed since the last ping (or none was sent); call it from the
  // loop whose liveness it proves.
  void watchdog(std::chrono::steady_clock::time_point now);

 private:
  static std::string one_line(std::string_view text);  // a STATUS= value: newlines would end it
  void send(const std::string& message);

  int fd_ = -1;
  std::string address_;  // the socket's path; abstract: starts with '\0'
  std::optional<std::chrono::microseconds> watchdog_interval_;
  std::optional<std::chrono::steady_clock::time_point> last_ping_;
  bool said_failure_ = false;
};

}  // namespace tricolor::control
