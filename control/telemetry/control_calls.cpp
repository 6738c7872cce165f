#include "control/telemetry/control_calls.hpp"

#include <algorithm>

namespace tricolor::control {

bool ControlCalls::call(std::function<void()> job, std::chrono::milliseconds timeout) {
  auto pending = std::make_shared<Pending>();
  pending->job = std::move(job);
  std::unique_lock lock(mutex_);
  if (closed_) return false;
  queue_.push_back(pending);
  queued_.store(queue_.size(), std::memory_order_relaxed);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  changed_.wait_until(lock, deadline, [&] { return pending->stage != Stage::queued; });
  if (pending->stage == Stage::queued) {  // not started in time: withdrawn, so it never runs
    queue_.erase(std::find(queue_.begin(), queue_.end(), pending));
    queued_.store(queue_.size(), std::memory_order_relaxed);
    return false;
  }
  // Started: it may use the caller's locals, so wait for its end however long it takes.
  changed_.wait(lock, [&] { return pending->stage == Stage::done || pending->stage == Stage::cancelled; });
  return pending->stage == Stage::done;
}

void ControlCalls::run_pending() {
  if (queued_.load(std::memory_order_relaxed) == 0) return;
  std::deque<std::shared_ptr<Pending>> batch;
  {
    std::lock_guard lock(mutex_);
    batch.swap(queue_);
    queued_.store(0, std::memory_order_relaxed);
    for (auto& pending : batch) pending->stage = Stage::running;
  }
  changed_.notify_all();
  for (auto& pending : batch) {
    Stage end = Stage::done;
    try {
      pending->job();  // without the lock: other threads may post meanwhile
    } catch (...) {    // (out of memory, say): that caller is told it failed; the control thread goes on
      end = Stage::cancelled;
    }
    {
      std::lock_guard lock(mutex_);
      pending->stage = end;
    }
    changed_.notify_all();
  }
}

void ControlCalls::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    for (auto& pending : queue_) pending->stage = Stage::cancelled;
    queue_.clear();
    queued_.store(0, std::memory_order_relaxed);
  }
  changed_.notify_all();
}

}  // namespace tricolor::control
