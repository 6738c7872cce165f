#include "policer/profile.hpp"

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
struct Allowed {
  bool eir, ebs, pir, pbs;
};

Allowed allowed_parameters(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::one_rate_two_color: return {false, false, false, false};
    case Algorithm::srtcm: return {false, true, false, false};
    case Algorithm::trtcm: return {false, false, true, true};
    case Algorithm::trtcm_4115: return {true, true, false, false};
  }
  return {false, false, false, false};
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

  const Allowed allowed = allowed_parameters(p.algorithm);
  struct Extra {
    const char* name;
    std::uint64_t value;
    bool allowed;
  };
  for (const Extra& e : {Extra{"eir", p.eir, allowed.eir}, Extra{"ebs", p.ebs, allowed.ebs},
                         Extra{"pir", p.pir, allowed.pir}, Extra{"pbs", p.pbs, allowed.pbs}}) {
    if (!e.allowed && e.value != 0) {
      return error(e.name, std::string(e.name) + " is not a parameter of " + algo);
    }
  }

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
  }
  return p;
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
  }
  profile.cost_per_byte_ = params.unit == Unit::bytes ? hz : 0;
  profile.cost_per_packet_ = params.unit == Unit::packets ? hz : 0;
  return profile;
}

}  // namespace tricolor::policer
