#include "dataplane/engine/rule_set.hpp"

#include <algorithm>

namespace tricolor::dataplane {

ProfileHistory ProfileHistory::with(std::uint64_t generation, const policer::Profile& before) const {
  ProfileHistory next = *this;
  if (next.count == kProfileHistory) {
    next.forgotten = next.changes[0]->generation;
    std::move(next.changes.begin() + 1, next.changes.end(), next.changes.begin());
    --next.count;
  }
  next.changes[next.count++] = ProfileChange{generation, before};
  return next;
}

std::optional<std::uint64_t> SeenGenerations::tick_of(std::uint64_t g) const noexcept {
  if (count_ == 0) return std::nullopt;
  const Seen& oldest = at(0);
  if (g <= oldest.generation) {
    // The first set this worker remembers is at or after g. Exact if it is g itself, or if nothing was
    // forgotten (the worker started after g: its first burst is the first it ran under g or later).
    if (oldest.generation == g || count_ < kSeen) return oldest.tick;
    return std::nullopt;
  }
  // Generations only grow: the first at or after g, by bisection (a per-key catch-up asks for each
  // change of a rule's history; a scan of all 64 made frequent changes cost most of a worker's time).
  std::size_t low = 1, high = count_;
  while (low < high) {
    const std::size_t mid = low + (high - low) / 2;
    if (at(mid).generation >= g) high = mid;
    else low = mid + 1;
  }
  if (low == count_) return std::nullopt;  // not seen yet: no set this worker ran brought it
  return at(low).tick;
}

HistoryTicks::HistoryTicks(const ProfileHistory& history, const SeenGenerations& seen) noexcept
    : oldest(seen.oldest_tick()) {
  if (history.forgotten != 0) forgotten = seen.tick_of(history.forgotten).value_or(oldest);
  for (std::size_t i = 0; i < history.count; ++i) change[i] = seen.tick_of(history[i].generation);
}

namespace {

// The profile a change led to: the next change's `before`, or the current profile after the last.
const policer::Profile& after(const ProfileHistory& history, std::size_t i, const policer::Profile& current) noexcept {
  return i + 1 < history.count ? history[i + 1].before : current;
}

}  // namespace

bool catch_up_key(policer::State& state, const ProfileHistory& history, const HistoryTicks& ticks,
                  const policer::Profile& current) noexcept {
  // A change the history no longer holds, made after the key's last check: it cannot be replayed.
  if (history.forgotten != 0 && state.last < ticks.forgotten) return false;
  for (std::size_t i = 0; i < history.count; ++i) {
    const auto& tick = ticks.change[i];
    if (!tick) {
      // Older than this worker remembers: a key checked since then saw it; one that was not, missed a
      // change whose tick is lost.
      if (state.last < ticks.oldest) return false;
      continue;
    }
    if (state.last < *tick) policer::change_profile(state, history[i].before, after(history, i, current), *tick);
  }
  return true;
}

void catch_up_shared(policer::AggregateMeter& meter, std::uint64_t& generation, const ProfileHistory* history,
                     std::uint64_t current_generation, const policer::Profile& current, const SeenGenerations& seen,
                     std::uint64_t now) noexcept {
  if (current_generation <= generation) return;  // at this set's profile already, or at a newer one
  bool exact = history != nullptr && history->forgotten <= generation;
  for (std::size_t i = 0; exact && i < history->count; ++i) {
    if ((*history)[i].generation <= generation) continue;  // applied by whoever checked the meter before
    const auto tick = seen.tick_of((*history)[i].generation);
    if (!tick) {
      exact = false;
      break;
    }
    meter.change((*history)[i].before, after(*history, i, current), *tick);
  }
  if (!exact) meter.restart(current, now);
  meter.rebind(current);
  generation = current_generation;
}

}  // namespace tricolor::dataplane
