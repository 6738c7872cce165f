#include "policer/profile.hpp"

#include <optional>
#include <string>

namespace tricolor::policer {

std::string_view to_string(Color color) noexcept {
  switch (color) {
    case Color::green: return "green";
    case Color::yellow: return "yellow";
    case Color::red: return "red";
  }
  return "?";
}

std::string_view to_string(Algorithm algorithm) noexcept {
  switch (algorithm) {
    case Algorithm::one_rate_two_color: return "1r2c";
    case Algorithm::srtcm: return "srtcm";
    case Algorithm::trtcm: return "trtcm";
    case Algorithm::trtcm_4115: return "trtcm4115";
    case Algorithm::fixed_window: return "fixed-window";
    case Algorithm::sliding_window: return "sliding-window";
    case Algorithm::gcra: return "gcra";
    case Algorithm::smooth: return "smooth";
    case Algorithm::warmup: return "warmup";
  }
  return "?";
}

std::string_view to_string(Unit unit) noexcept {
  switch (unit) {
    case Unit::bytes: return "bytes";
    case Unit::packets: return "packets";
  }
  return "?";
}

namespace {

Error error(std::string subject, std::string message) {
  return Error{std::move(subject), std::move(message)};
}

std::string rate_unit(Unit unit) { return unit == Unit::bytes ? " bytes/s" : " packets/s"; }
std::string burst_unit(Unit unit) { return unit == Unit::bytes ? " bytes" : " packets"; }

// The parameters each algorithm takes; any other one given non-zero is refused, so a typo such as
// "srtcm ... pbs 64k" cannot be silently ignored.
enum Param : unsigned {
  kCir = 1u << 0, kCbs = 1u << 1, kEir = 1u << 2, kEbs = 1u << 3, kPir = 1u << 4, kPbs = 1u << 5,
  kRate = 1u << 6, kLimit = 1u << 7, kWindow = 1u << 8, kTolerance = 1u << 9, kMaxBurstParam = 1u << 10,
  kPeriod = 1u << 11, kBucketsParam = 1u << 12, kColdFactor = 1u << 13,
};

unsigned allowed_parameters(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::one_rate_two_color: return kCir | kCbs;
    case Algorithm::srtcm: return kCir | kCbs | kEbs;
    case Algorithm::trtcm: return kCir | kCbs | kPir | kPbs;
    case Algorithm::trtcm_4115: return kCir | kCbs | kEir | kEbs;
    case Algorithm::fixed_window: return kLimit | kWindow;
    case Algorithm::sliding_window: return kLimit | kWindow | kBucketsParam;
    case Algorithm::gcra: return kRate | kTolerance;
    case Algorithm::smooth: return kRate | kMaxBurstParam;
    case Algorithm::warmup: return kRate | kPeriod | kColdFactor;
  }
  return 0;
}

using u128 = unsigned __int128;

// Ticks in `ns` nanoseconds at `hz`, rounded up (at least one tick): a window or period is never
// shorter than asked. ns * hz < 2^55 * 2^33.
std::uint64_t ticks_in(std::uint64_t ns, std::uint64_t hz) {
  const u128 scaled = u128(ns) * hz;
  const u128 ticks = scaled / kNsPerSecond + (scaled % kNsPerSecond != 0 ? 1 : 0);
  return static_cast<std::uint64_t>(std::max<u128>(ticks, 1));
}

// Validation of the limiters' own parameters (the generic checks have run).
Expected<Params> validate_limiter(const Params& p, const std::string& algo) {
  const std::uint64_t max_rate = p.unit == Unit::bytes ? kMaxByteRate : kMaxPacketRate;
  auto positive = [&](const char* name, std::uint64_t value) -> std::optional<Error> {
    if (value == 0) return error(name, algo + ": " + name + " must be greater than 0");
    return std::nullopt;
  };
  auto duration = [&](const char* name, std::uint64_t ns, bool zero_ok) -> std::optional<Error> {
    if (!zero_ok) {
      if (auto e = positive(name, ns)) return e;
    }
    if (ns > kMaxDurationNs)
      return error(name, algo + ": " + name + " " + std::to_string(ns) + " ns exceeds the maximum of 366 days (" +
                             std::to_string(kMaxDurationNs) + " ns)");
    return std::nullopt;
  };
  auto rate = [&]() -> std::optional<Error> {
    if (auto e = positive("rate", p.rate)) return e;
    if (p.rate > max_rate)
      return error("rate", "rate " + std::to_string(p.rate) + rate_unit(p.unit) + " exceeds the maximum rate of " +
                               std::to_string(max_rate) + rate_unit(p.unit));
    return std::nullopt;
  };
  std::optional<Error> e;
  switch (p.algorithm) {
    case Algorithm::fixed_window:
    case Algorithm::sliding_window:
      if ((e = positive("limit", p.limit))) return *e;
      if (p.limit > kMaxBurst)
        return error("limit", "limit " + std::to_string(p.limit) + burst_unit(p.unit) + " exceeds the maximum of " +
                                  std::to_string(kMaxBurst) + burst_unit(p.unit));
      if ((e = duration("window", p.window, false))) return *e;
      if (p.algorithm == Algorithm::sliding_window && (p.buckets < 1 || p.buckets > kMaxWindowBuckets))
        return error("buckets", algo + ": buckets " + std::to_string(p.buckets) + " is out of range: 1 to " +
                                    std::to_string(kMaxWindowBuckets) + " sub-windows");
      break;
    case Algorithm::gcra:
      if ((e = rate())) return *e;
      if ((e = duration("tolerance", p.tolerance, true))) return *e;
      // The equivalent bucket, tolerance * rate + 1 token, must be a burst tricolor supports.
      if (u128(p.tolerance) * p.rate > u128(kMaxBurst - 1) * kNsPerSecond)
        return error("tolerance", algo + ": tolerance " + std::to_string(p.tolerance) + " ns at rate " +
                                      std::to_string(p.rate) + rate_unit(p.unit) + " allows a burst above " +
                                      std::to_string(kMaxBurst) + burst_unit(p.unit) +
                                      " (tolerance * rate + 1 must be at most that)");
      break;
    case Algorithm::smooth:
      if ((e = rate())) return *e;
      if (p.max_burst > kMaxBurst)
        return error("max-burst", "max-burst " + std::to_string(p.max_burst) + burst_unit(p.unit) +
                                      " exceeds the maximum burst of " + std::to_string(kMaxBurst) + burst_unit(p.unit));
      break;
    case Algorithm::warmup: {
      if ((e = rate())) return *e;
      if ((e = duration("period", p.period, false))) return *e;
      if (p.cold_factor < kMinColdFactor || p.cold_factor > kMaxColdFactor)
        return error("cold-factor", algo + ": cold-factor " + std::to_string(p.cold_factor) + " is out of range: " +
                                        std::to_string(kMinColdFactor) + " to " + std::to_string(kMaxColdFactor));
      // Guava's most stored permits, period * rate * (C + 5) / (2 (C + 1)), times C (the dearest a
      // permit costs) must stay within the largest burst: it bounds every fast-path product.
      const u128 c = p.cold_factor;
      if (u128(p.period) * p.rate * (c + 5) * c > u128(kMaxBurst) * 2 * kNsPerSecond * (c + 1))
        return error("period", algo + ": period " + std::to_string(p.period) + " ns at rate " + std::to_string(p.rate) +
                                   rate_unit(p.unit) + " stores too many permits: period * rate * (C + 5) / (2 (C + 1)) * C" +
                                   " must be at most " + std::to_string(kMaxBurst) + burst_unit(p.unit));
      break;
    }
    default: break;
  }
  return p;
}

}  // namespace

Expected<TickRate> TickRate::make(std::uint64_t hz) {
  if (hz == 0 || hz > kMaxHz) {
    return error("hz", "hz " + std::to_string(hz) + " is out of range: the tick rate must be 1 to " +
                           std::to_string(kMaxHz) + " ticks per second");
  }
  return TickRate(hz);
}

Expected<std::uint64_t> byte_rate_from_bit_rate(std::uint64_t bits_per_second) {
  if (bits_per_second % 8 != 0) {
    return error("rate", "rate " + std::to_string(bits_per_second) +
                             " bit/s is not a whole number of bytes per second; give a multiple of 8 bit/s");
  }
  return bits_per_second / 8;
}

Expected<Params> validate(const Params& p) {
  const std::string algo(to_string(p.algorithm));
  const std::uint64_t max_rate = p.unit == Unit::bytes ? kMaxByteRate : kMaxPacketRate;

  const unsigned allowed = allowed_parameters(p.algorithm);
  struct Extra {
    const char* name;
    std::uint64_t value;
    unsigned param;
  };
  for (const Extra& e : {Extra{"cir", p.cir, kCir}, Extra{"cbs", p.cbs, kCbs}, Extra{"eir", p.eir, kEir},
                         Extra{"ebs", p.ebs, kEbs}, Extra{"pir", p.pir, kPir}, Extra{"pbs", p.pbs, kPbs},
                         Extra{"rate", p.rate, kRate}, Extra{"limit", p.limit, kLimit},
                         Extra{"window", p.window, kWindow}, Extra{"tolerance", p.tolerance, kTolerance},
                         Extra{"max-burst", p.max_burst, kMaxBurstParam}, Extra{"period", p.period, kPeriod},
                         Extra{"buckets", p.buckets, kBucketsParam}, Extra{"cold-factor", p.cold_factor, kColdFactor}}) {
    if ((allowed & e.param) == 0 && e.value != 0) {
      return error(e.name, std::string(e.name) + " is not a parameter of " + algo);
    }
  }
  if (is_limiter(p.algorithm)) return validate_limiter(p, algo);

  struct Rate {
    const char* name;
    std::uint64_t value;
  };
  for (const Rate& r : {Rate{"cir", p.cir}, Rate{"eir", p.eir}, Rate{"pir", p.pir}}) {
    if (r.value > max_rate) {
      return error(r.name, std::string(r.name) + " " + std::to_string(r.value) + rate_unit(p.unit) +
                               " exceeds the maximum rate of " + std::to_string(max_rate) +
                               rate_unit(p.unit));
    }
  }
  for (const Rate& b : {Rate{"cbs", p.cbs}, Rate{"ebs", p.ebs}, Rate{"pbs", p.pbs}}) {
    if (b.value > kMaxBurst) {
      return error(b.name, std::string(b.name) + " " + std::to_string(b.value) + burst_unit(p.unit) +
                               " exceeds the maximum burst of " + std::to_string(kMaxBurst) +
                               burst_unit(p.unit));
    }
  }

  auto must_be_positive = [&](const char* name, std::uint64_t value, const char* why) -> Expected<Params> {
    if (value == 0) return error(name, algo + ": " + name + " must be greater than 0" + why);
    return p;
  };

  switch (p.algorithm) {
    case Algorithm::one_rate_two_color:
      if (auto r = must_be_positive("cir", p.cir, ""); !r) return r;
      if (auto r = must_be_positive("cbs", p.cbs, ""); !r) return r;
      break;
    case Algorithm::srtcm:
      if (auto r = must_be_positive("cir", p.cir, ""); !r) return r;
      if (p.cbs + p.ebs == 0) return error("cbs", algo + ": cbs and ebs cannot both be 0");
      break;
    case Algorithm::trtcm:
      if (auto r = must_be_positive("cir", p.cir, ""); !r) return r;
      if (auto r = must_be_positive("pir", p.pir, ""); !r) return r;
      if (p.pir < p.cir) {
        return error("pir", algo + ": pir " + std::to_string(p.pir) + rate_unit(p.unit) +
                                " must be at least cir " + std::to_string(p.cir) + rate_unit(p.unit));
      }
      if (auto r = must_be_positive("cbs", p.cbs, ""); !r) return r;
      if (auto r = must_be_positive("pbs", p.pbs, ""); !r) return r;
      break;
    case Algorithm::trtcm_4115:
      if (p.cir == 0 && p.eir == 0) return error("cir", algo + ": cir and eir cannot both be 0");
      if (p.cir > 0) {
        if (auto r = must_be_positive("cbs", p.cbs, " when cir is greater than 0"); !r) return r;
      }
      if (p.eir > 0) {
        if (auto r = must_be_positive("ebs", p.ebs, " when eir is greater than 0"); !r) return r;
      }
      break;
    default: break;
  }
  return p;
}

Expected<Params> validate_per_key(const Params& p) {
  if (auto valid = validate(p); !valid) return valid;
  if (!fits_state(p))
    return error("buckets", std::string(to_string(p.algorithm)) + ": buckets " + std::to_string(p.buckets) +
                                " does not fit a per-key meter, whose state holds " +
                                std::to_string(kMaxStateWindowBuckets) +
                                " sub-window counters; give buckets 1 to " + std::to_string(kMaxStateWindowBuckets) +
                                " or meter the rule as one aggregate");
  return p;
}

Reciprocal Reciprocal::of(std::uint64_t divisor) noexcept {
  const u128 m = ~u128(0) / (divisor == 0 ? 1 : divisor);
  return Reciprocal{divisor == 0 ? 1 : divisor, static_cast<std::uint64_t>(m >> 64), static_cast<std::uint64_t>(m)};
}

namespace {
// Cold path: the only divisions of the meter library. Ticks for `rate` tokens/s to deliver
// `scaled_tokens` (1/hz tokens), rounded up so that a clamped gap always fills the bucket.
std::uint64_t ticks_to_deliver(std::uint64_t scaled_tokens, std::uint64_t rate) {
  if (rate == 0) return 0;  // a zero-rate bucket (RFC 4115) never refills
  return scaled_tokens / rate + (scaled_tokens % rate != 0 ? 1 : 0);
}
}  // namespace

Expected<Profile> Profile::make(const Params& params, TickRate tick_rate) {
  if (auto valid = validate(params); !valid) return valid.error();
  const std::uint64_t hz = tick_rate.hz();

  Profile profile(params, tick_rate);
  auto set_bucket = [&](std::size_t b, std::uint64_t rate, std::uint64_t burst) {
    profile.size_[b] = burst * hz;  // <= 2^30 * 5e9 < 2^63
    profile.rate_[b] = rate;
    profile.fill_ticks_[b] = ticks_to_deliver(profile.size_[b], rate);
  };

  switch (params.algorithm) {
    case Algorithm::one_rate_two_color:
      set_bucket(0, params.cir, params.cbs);
      break;
    case Algorithm::srtcm:
      set_bucket(0, params.cir, params.cbs);
      set_bucket(1, 0, params.ebs);
      // Both buckets fill from the one C rate: the clamp is the time to fill C and then E.
      // (cbs + ebs) * hz <= 2^31 * 5e9 < 2^64.
      profile.fill_ticks_[0] = ticks_to_deliver((params.cbs + params.ebs) * hz, params.cir);
      break;
    case Algorithm::trtcm:
      set_bucket(0, params.cir, params.cbs);
      set_bucket(1, params.pir, params.pbs);
      break;
    case Algorithm::trtcm_4115:
      set_bucket(0, params.cir, params.cbs);
      set_bucket(1, params.eir, params.ebs);
      break;
    default:
      if (auto made = profile.make_limiter(); !made) return made.error();
      break;
  }
  // The windows count whole tokens; the others 1/hz tokens.
  const bool window = params.algorithm == Algorithm::fixed_window || params.algorithm == Algorithm::sliding_window;
  const std::uint64_t token = window ? 1 : hz;
  profile.cost_per_byte_ = params.unit == Unit::bytes ? token : 0;
  profile.cost_per_packet_ = params.unit == Unit::packets ? token : 0;
  return profile;
}

// The limiters' constants (units in limiters.hpp). Every rounding happens here, once.
Expected<bool> Profile::make_limiter() {
  const Params& p = params_;
  const std::uint64_t hz = tick_rate_.hz();
  LimiterConstants& k = limiter_;
  switch (p.algorithm) {
    case Algorithm::fixed_window:
      k.limit = p.limit;
      k.ticks = ticks_in(p.window, hz);  // rounded up
      size_[0] = p.limit;                // a new meter: the whole limit left, no window open
      size_[1] = 0;
      break;
    case Algorithm::sliding_window: {
      k.limit = p.limit;
      k.buckets = p.buckets;
      // One sub-window: window / K rounded up to whole ticks, so the window is K of them.
      const u128 scaled = u128(p.window) * hz, per = u128(kNsPerSecond) * p.buckets;
      k.ticks = static_cast<std::uint64_t>(std::max<u128>(scaled / per + (scaled % per != 0 ? 1 : 0), 1));
      k.divide = Reciprocal::of(k.ticks);
      break;  // a new meter: every counter 0
    }
    case Algorithm::gcra:
      // The TAT may run ahead of the clock by tolerance + one emission interval: floor of the exact
      // (tolerance * hz / 1e9 + hz / rate) * rate in 1/hz tokens. Integers compared with a real
      // number's floor decide exactly as with the real number.
      k.limit = static_cast<std::uint64_t>(u128(p.tolerance) * hz * p.rate / kNsPerSecond) + hz;
      rate_[0] = p.rate;
      fill_ticks_[0] = ticks_to_deliver(k.limit, p.rate);  // after this the TAT is in the past
      break;                                               // a new meter: TAT at the creation tick
    case Algorithm::smooth:
      k.limit = p.max_burst * hz;
      rate_[0] = p.rate;
      size_[0] = k.limit;  // a new meter: stored permits full (Guava's start empty; see limiters.hpp)
      break;
    case Algorithm::warmup: {
      // Guava: threshold = 0.5 * period * rate, max = threshold + 2 * period * rate / (1 + C) permits;
      // here in 1/hz tokens, each rounded down once.
      const u128 scaled = u128(p.period) * hz * p.rate;  // 1e9 * (period * rate) in 1/hz tokens
      k.threshold = static_cast<std::uint64_t>(scaled / (2 * kNsPerSecond));
      const u128 warm = 2 * scaled / (u128(kNsPerSecond) * (p.cold_factor + 1));
      if (warm == 0)
        return Error{"period", "warmup: period " + std::to_string(p.period) + " ns at rate " + std::to_string(p.rate) +
                                   " gives no warm-up zone at " + std::to_string(hz) +
                                   " ticks per second; give a longer period"};
      k.limit = k.threshold + static_cast<std::uint64_t>(warm);
      k.cold_minus_one = p.cold_factor - 1;
      k.divide = Reciprocal::of(2 * static_cast<std::uint64_t>(warm));
      rate_[0] = p.rate;
      size_[0] = k.limit;  // a new meter is cold: stored permits full, as Guava's
      break;
    }
    default: break;
  }
  return true;
}

}  // namespace tricolor::policer
