#pragma once
// An independent reference model of the four meters, written from shared/docs/meters.md alone. It
// shares no code or representation trick with policer/: it keeps 128-bit totals since the meter's
// creation (tokens credited by the clock, tokens taken by packets, tokens discarded at a full bucket)
// and derives each level from them. The credit of a bucket is always recomputed as
// rate * (t - t_created), never from the previous check's Δt, and no gap is clamped.
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tricolor::test {

using u128 = unsigned __int128;

enum class RefAlgorithm { one_rate_two_color, srtcm, trtcm, trtcm_4115 };
enum class RefColor { green, yellow, red };

struct RefParams {
  RefAlgorithm algorithm;
  bool packet_mode = false;  // one token = one packet
  std::uint64_t cir = 0, cbs = 0, eir = 0, ebs = 0, pir = 0, pbs = 0;
  std::uint64_t hz = 1'000'000'000;
};

// One bucket, in units of 1/hz token, as totals since creation.
struct RefBucket {
  u128 size = 0;      // capacity
  u128 start = 0;     // level at creation (full)
  u128 received = 0;  // tokens that found room here (clock credit, or srTCM's overflow into E)
  u128 taken = 0;     // tokens consumed by packets

  u128 level() const { return start + received - taken; }
  // Keeps what fits of `tokens`; returns the rest (discarded, or passed on by srTCM).
  u128 fill(u128 tokens) {
    const u128 room = size - level();
    const u128 kept = tokens < room ? tokens : room;
    received += kept;
    return tokens - kept;
  }
};

class ReferenceMeter {
 public:
  ReferenceMeter(const RefParams& p, std::uint64_t created) : p_(p), created_(created), now_(created) {
    const u128 hz = p.hz;
    c_.size = c_.start = u128(p.cbs) * hz;
    switch (p.algorithm) {
      case RefAlgorithm::one_rate_two_color: break;
      case RefAlgorithm::srtcm: second_.size = second_.start = u128(p.ebs) * hz; break;
      case RefAlgorithm::trtcm: second_.size = second_.start = u128(p.pbs) * hz; break;
      case RefAlgorithm::trtcm_4115: second_.size = second_.start = u128(p.ebs) * hz; break;
    }
  }

  RefColor check(std::uint64_t t, std::uint64_t length) { return check(t, length, false, RefColor::green); }
  RefColor check_aware(std::uint64_t t, std::uint64_t length, RefColor in) { return check(t, length, true, in); }

  // Levels in 1/hz tokens after bringing the buckets to time t (t earlier than the latest time counts
  // as the latest time).
  u128 c_level() const { return c_.level(); }
  u128 second_level() const { return second_.level(); }
  std::uint64_t now() const { return now_; }
  const RefParams& params() const { return p_; }

  // A live change of parameters at time t (doc/meters.md, "Live change"): levels are brought to t at the old
  // parameters, clamped to the new sizes, and credited at the new rates from t on; another algorithm or
  // unit starts full. Written as a new meter created at t whose buckets start at the kept levels.
  void change(const RefParams& to, std::uint64_t t) {
    advance(t);
    const bool same_family = to.algorithm == p_.algorithm && to.packet_mode == p_.packet_mode && to.hz == p_.hz;
    const u128 c = c_.level(), second = second_.level();
    *this = ReferenceMeter(to, now_);
    if (!same_family) return;
    c_.start = c < c_.size ? c : c_.size;
    second_.start = second < second_.size ? second : second_.size;
  }

  void advance(std::uint64_t t) {
    if (t <= now_) return;  // a stale check credits nothing and the clock never moves back
    now_ = t;
    const u128 elapsed = u128(now_ - created_);
    // Credit since creation, minus what was already credited: exact, whatever the check pattern.
    const u128 c_total = u128(p_.cir) * elapsed;
    const u128 c_new = c_total - c_credited_;
    c_credited_ = c_total;
    switch (p_.algorithm) {
      case RefAlgorithm::one_rate_two_color:
        c_.fill(c_new);
        break;
      case RefAlgorithm::srtcm:
        // Each token goes to C if C has room, else to E if E has room, else is discarded.
        second_.fill(c_.fill(c_new));
        break;
      case RefAlgorithm::trtcm:
      case RefAlgorithm::trtcm_4115: {
        c_.fill(c_new);
        const std::uint64_t rate2 = p_.algorithm == RefAlgorithm::trtcm ? p_.pir : p_.eir;
        const u128 s_total = u128(rate2) * elapsed;
        second_.fill(s_total - s_credited_);
        s_credited_ = s_total;
        break;
      }
    }
  }

 private:
  RefColor check(std::uint64_t t, std::uint64_t length, bool aware, RefColor in) {
    advance(t);
    const u128 b = u128(p_.packet_mode ? 1 : length) * p_.hz;
    const bool pre_green = !aware || in == RefColor::green;
    const bool pre_yellow = aware && in == RefColor::yellow;
    const bool pre_red = aware && in == RefColor::red;
    switch (p_.algorithm) {
      case RefAlgorithm::one_rate_two_color:
        if (pre_green && c_.level() >= b) return take(c_, b, RefColor::green);
        return RefColor::red;
      case RefAlgorithm::srtcm:
      case RefAlgorithm::trtcm_4115:
        if (pre_green && c_.level() >= b) return take(c_, b, RefColor::green);
        if ((pre_green || pre_yellow) && second_.level() >= b) return take(second_, b, RefColor::yellow);
        return RefColor::red;
      case RefAlgorithm::trtcm: {
        // RFC 2698: P is tested first; red if it cannot take the packet.
        if (pre_red || second_.level() < b) return RefColor::red;
        if (pre_yellow || c_.level() < b) return take(second_, b, RefColor::yellow);
        second_.taken += b;
        c_.taken += b;
        return RefColor::green;
      }
    }
    throw std::logic_error("unknown algorithm");
  }

  static RefColor take(RefBucket& bucket, u128 b, RefColor color) {
    bucket.taken += b;
    return color;
  }

  RefParams p_;
  std::uint64_t created_;
  std::uint64_t now_;
  u128 c_credited_ = 0;
  u128 s_credited_ = 0;
  RefBucket c_;
  RefBucket second_;  // E (srTCM, RFC 4115) or P (RFC 2698)
};

inline std::string to_string(RefColor c) {
  return c == RefColor::green ? "green" : c == RefColor::yellow ? "yellow" : "red";
}

}  // namespace tricolor::test
