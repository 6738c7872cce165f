#pragma once
// Calls into the control thread from the daemon's other threads (the metrics listener's, DPDK
// telemetry's). The engine's rule set and counters' layout belong to the control thread: it installs
// changes, so only it may walk the rules. Another thread posts a job and waits; the control loop runs
// the jobs posted so far at each turn (every millisecond). The workers are never involved: a scrape
// costs them nothing, and no thread ever waits on a worker.
//
// It serves two parts: telemetry makes the calls and the daemon's control loop runs them. It lives in
// control/telemetry/ because the daemon includes telemetry (the listener, the exposition) and never
// the reverse: here the arrow runs daemon -> telemetry.
//
// A job may use the caller's locals: call() returns only once the job has run or will never run.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace tricolor::control {

class ControlCalls {
 public:
  // Any thread but the control thread: runs `job` there at its next turn and waits for it to end.
  // False when the control thread did not start it within `timeout` (it is busy with a long load, or
  // stopping) or no longer takes calls; then the job never runs.
  bool call(std::function<void()> job, std::chrono::milliseconds timeout);

  // The control thread, once per turn: runs every job posted before this call. Cheap when none is.
  void run_pending();

  // At the stop: waiting and later calls return false; jobs not yet started never run.
  void close();

 private:
  enum class Stage { queued, running, done, cancelled };
  struct Pending {
    std::function<void()> job;
    Stage stage = Stage::queued;
  };

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Pending>> queue_;
  std::atomic<std::size_t> queued_{0};  // queue_.size(), read without the lock at each turn
  bool closed_ = false;
};

}  // namespace tricolor::control
