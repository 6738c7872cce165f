#include "control/cluster/cluster_leases.hpp"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

namespace tricolor::control {
namespace {

using policer::ClusterLease;
using policer::ClusterMode;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kLargestFrame = 9216;  // byte mode: a chunk holds at least one jumbo frame
constexpr std::uint64_t kMicro = 1'000'000;    // the script keeps millionths of a token

// Exact to 2^53 in Lua's doubles: levels up to CBS x 1e6 <= 2^30 x 1e6 < 2^50, and the refill is
// bounded by the time to full before it is multiplied. Numbers go back to Redis through
// string.format('%d'), which keeps every digit (tostring would keep 14).
const std::string kScript = R"lua(-- tricolor cluster meter: refill to Redis' TIME, then lease
local cir, cbs, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not cir or not cbs or not want or cir < 1 or cbs < 1 or want < 0 then
  return redis.error_reply('tricolor: bad lease arguments')
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local full = cbs * 1000000
local state = redis.call('HMGET', KEYS[1], 'level', 't')
local level, t = tonumber(state[1]), tonumber(state[2])
if level == nil or t == nil then level, t = full, now end
if level > full then level = full end
if now > t then
  local to_full = math.ceil((full - level) / cir)
  level = math.min(full, level + math.min(now - t, to_full) * cir)
  t = now
end
local grant = math.min(want, math.floor(level / 1000000))
level = level - grant * 1000000
redis.call('HSET', KEYS[1], 'level', string.format('%d', level), 't', string.format('%d', t))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(full / cir / 1000) + 60000))
local wait = 0
if grant < want then wait = math.ceil(((want - grant) * 1000000 - level) / cir) end
return {grant, math.floor(level / 1000000), wait}
)lua";

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(std::chrono::microseconds d) {
  return timeval{static_cast<time_t>(d.count() / 1'000'000), static_cast<suseconds_t>(d.count() % 1'000'000)};
}

std::string reply_text(const redisReply* r) {
  if (r == nullptr) return "no reply";
  switch (r->type) {
    case REDIS_REPLY_ERROR: return "error " + std::string(r->str, std::min<std::size_t>(r->len, 200));
    case REDIS_REPLY_STRING: return "a string";
    case REDIS_REPLY_INTEGER: return "an integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_ARRAY: return "an array of " + std::to_string(r->elements);
    case REDIS_REPLY_STATUS: return "a status";
  }
  return "a reply of an unknown type";
}

}  // namespace

struct ClusterLeases::Connection {
  redisContext* context = nullptr;
  ~Connection() {
    if (context != nullptr) redisFree(context);
  }
  // One command, its words as given (binary-safe), or no reply when the connection failed.
  Reply command(const std::vector<std::string>& words) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const std::string& w : words) {
      argv.push_back(w.data());
      lengths.push_back(w.size());
    }
    return Reply(static_cast<redisReply*>(redisCommandArgv(context, static_cast<int>(argv.size()), argv.data(), lengths.data())));
  }
  std::string error() const { return context != nullptr && context->err != 0 ? std::string(context->errstr) : "no reply"; }
};

Expected<bool> check_redis_address(const std::string& address) {
  if (address.starts_with("unix:")) {
    if (address.size() == 5) return Error{address, "--cluster-redis unix:PATH: the path is missing"};
    return true;
  }
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Error{address, "--cluster-redis: expected HOST:PORT or unix:PATH, not '" + address + "'"};
  unsigned port = 0;
  const char* first = address.data() + colon + 1;
  const char* last = address.data() + address.size();
  const auto [end, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || end != last || port == 0 || port > 65535)
    return Error{address, "--cluster-redis: the port of '" + address + "' is not a number from 1 to 65535"};
  return true;
}

std::uint64_t cluster_chunk(const policer::Params& budget, std::chrono::microseconds rtt) noexcept {
  const std::uint64_t floor = budget.unit == policer::Unit::packets ? 2 : kLargestFrame;
  const auto by_rate = static_cast<std::uint64_t>(static_cast<unsigned __int128>(budget.cir) * 2 *
                                                  static_cast<std::uint64_t>(rtt.count()) / 1'000'000);
  return std::max<std::uint64_t>(1, std::min(budget.cbs, std::max(by_rate, floor)));
}

std::string cluster_bound_text(const std::string& name, const policer::Params& budget, std::uint64_t chunk, unsigned boxes) {
  const std::string unit = budget.unit == policer::Unit::packets ? " packets" : " bytes";
  return "cluster " + name + ": CIR " + std::to_string(budget.cir) + unit + "/s, CBS " + std::to_string(budget.cbs) + unit +
         ", leased in chunks of " + std::to_string(chunk) + unit + ": green across the boxes over any T <= CBS + CIR*T + " +
         std::to_string(boxes) + (boxes == 1 ? " box x " : " boxes x ") + std::to_string(chunk) + unit + " = " +
         std::to_string(budget.cbs + std::uint64_t{boxes} * chunk) + unit + " + CIR*T";
}

const std::string& cluster_lease_script() { return kScript; }

Expected<std::string> read_password_file(const std::string& path, std::string& warning) {
  const std::string where = "--cluster-password-file '" + path + "'";
  // O_NONBLOCK: a FIFO in the file's place is refused below instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Error{"cluster-password-file", where + ": " + std::strerror(errno)};
  struct stat status {};
  std::string text;
  const bool regular = ::fstat(fd, &status) == 0 && S_ISREG(status.st_mode);
  if (regular && status.st_size <= 4096) {
    text.resize(static_cast<std::size_t>(status.st_size));
    const ssize_t got = ::read(fd, text.data(), text.size());
    text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  }
  ::close(fd);
  if (!regular) return Error{"cluster-password-file", where + ": not a regular file"};
  if (status.st_size > 4096) return Error{"cluster-password-file", where + ": larger than 4 KiB, not a password"};
  text = text.substr(0, text.find_first_of("\r\n"));
  if (text.empty()) return Error{"cluster-password-file", where + ": its first line is empty"};
  if ((status.st_mode & S_IRWXO) != 0) warning = where + ": others may read it (chmod o-rwx)";
  return text;
}

ClusterLeases::ClusterLeases(dataplane::Engine& engine, ClusterOptions options, Log log)
    : engine_(engine), options_(std::move(options)), log_(std::move(log)) {}

ClusterLeases::~ClusterLeases() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ClusterLeases::start() {
  thread_ = std::thread([this] { run(); });
}

void ClusterLeases::run() {
  while (!stop_.load(std::memory_order_relaxed)) {
    turn();
    std::this_thread::sleep_for(std::chrono::microseconds(std::clamp<std::int64_t>(options_.rtt.count() / 4, 200, 1000)));
  }
}

bool ClusterLeases::connect() {
  redis_ = std::make_unique<Connection>();
  const timeval limit = to_timeval(options_.timeout);
  if (options_.redis.starts_with("unix:")) {
    redis_->context = redisConnectUnixWithTimeout(options_.redis.c_str() + 5, limit);
  } else {
    const auto colon = options_.redis.rfind(':');
    const std::string host = options_.redis.substr(0, colon);
    redis_->context = redisConnectWithTimeout(host.c_str(), std::stoi(options_.redis.substr(colon + 1)), limit);
  }
  if (redis_->context == nullptr || redis_->context->err != 0) {
    disconnect("cannot connect: " + redis_->error());
    return false;
  }
  redisSetTimeout(redis_->context, limit);
  if (!options_.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!options_.user.empty()) auth.push_back(options_.user);
    auth.push_back(options_.password);
    const Reply reply = redis_->command(auth);
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
      disconnect("AUTH refused: " + (reply ? reply_text(reply.get()) : redis_->error()));
      return false;
    }
  }
  const Reply loaded = redis_->command({"SCRIPT", "LOAD", kScript});
  if (!loaded || loaded->type != REDIS_REPLY_STRING) {
    disconnect("SCRIPT LOAD: " + (loaded ? reply_text(loaded.get()) : redis_->error()));
    return false;
  }
  sha_.assign(loaded->str, loaded->len);
  if (said_unreachable_) log_("cluster: Redis " + options_.redis + " answers again; leases resume");
  else log_("cluster: Redis " + options_.redis + " connected; leasing");
  said_unreachable_ = false;
  return true;
}

void ClusterLeases::disconnect(const std::string& why) {
  redis_.reset();
  next_connect_ = Clock::now() + options_.retry;
  if (!said_unreachable_)
    log_("cluster: Redis " + options_.redis + ": " + why + "; every cluster meter falls back to " +
         std::string(policer::to_string(options_.fallback)) + ", trying again every " +
         std::to_string(options_.retry.count() / 1000) + " ms");
  said_unreachable_ = true;
  for (const dataplane::ClusterInfo& cluster : engine_.clusters()) fall_back(*cluster.lease);
}

void ClusterLeases::fall_back(ClusterLease& lease) {
  if (lease.mode() == options_.fallback) return;
  lease.set_mode(options_.fallback);
  lease.record().fallbacks.fetch_add(1, std::memory_order_relaxed);
}

void ClusterLeases::turn() {
  const std::vector<dataplane::ClusterInfo> clusters = engine_.clusters();
  for (const dataplane::ClusterInfo& cluster : clusters) {
    auto [it, added] = known_.try_emplace(cluster.name);
    Known& known = it->second;
    if (added || !(known.budget == cluster.budget)) {
      known.budget = cluster.budget;
      known.chunk = cluster_chunk(cluster.budget, options_.rtt);
      cluster.lease->record().chunk.store(known.chunk, std::memory_order_relaxed);
      if (cluster.in_use) log_(cluster_bound_text(cluster.name, cluster.budget, known.chunk, options_.boxes));
    }
  }
  if (!redis_) {
    if (Clock::now() < next_connect_ || !connect()) return;
  }
  for (const dataplane::ClusterInfo& cluster : clusters) {
    if (!cluster.in_use) continue;
    lease(cluster, known_.find(cluster.name)->second);
    if (!redis_) return;  // the connection failed: every cluster has fallen back
  }
}

void ClusterLeases::lease(const dataplane::ClusterInfo& cluster, Known& known) {
  ClusterLease& lease = *cluster.lease;
  const std::uint64_t balance = lease.balance();
  const Clock::time_point now = Clock::now();
  if ((balance >= known.chunk / 2 && lease.mode() == ClusterMode::leased) || now < known.next_lease) return;
  const std::uint64_t want = known.chunk - std::min(balance, known.chunk);
  const std::vector<std::string> words{"EVALSHA", sha_, "1", options_.key_prefix + cluster.name,
                                       std::to_string(known.budget.cir), std::to_string(known.budget.cbs), std::to_string(want)};
  Reply reply = redis_->command(words);
  if (reply && reply->type == REDIS_REPLY_ERROR && std::string_view(reply->str, reply->len).starts_with("NOSCRIPT")) {
    // Redis restarted (its script cache is empty): load it again, once.
    const Reply loaded = redis_->command({"SCRIPT", "LOAD", kScript});
    if (loaded && loaded->type == REDIS_REPLY_STRING) {
      sha_.assign(loaded->str, loaded->len);
      std::vector<std::string> again = words;
      again[1] = sha_;
      reply = redis_->command(again);
    }
  }
  if (!reply) {
    lease.record().failures.fetch_add(1, std::memory_order_relaxed);
    disconnect(redis_->error().empty() ? "no answer" : redis_->error());
    return;
  }
  const bool well_formed = reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
                           std::all_of(reply->element, reply->element + 3,
                                       [](const redisReply* e) { return e->type == REDIS_REPLY_INTEGER && e->integer >= 0; }) &&
                           static_cast<std::uint64_t>(reply->element[0]->integer) <= want;
  if (!well_formed) {
    // A wrong Redis (a key of another type, a script of the same name that answers otherwise): this
    // cluster falls back and is asked again after the retry period.
    lease.record().failures.fetch_add(1, std::memory_order_relaxed);
    if (!known.failing)
      log_("cluster " + cluster.name + ": Redis answered " + reply_text(reply.get()) +
           " (expected three integers, the tokens granted at most those asked); falling back to " +
           std::string(policer::to_string(options_.fallback)));
    known.failing = true;
    known.next_lease = now + options_.retry;
    fall_back(lease);
    return;
  }
  const auto granted = static_cast<std::uint64_t>(reply->element[0]->integer);
  const auto wait_us = static_cast<std::uint64_t>(reply->element[2]->integer);
  lease.grant(granted);
  lease.record().leases.fetch_add(1, std::memory_order_relaxed);
  if (known.failing) log_("cluster " + cluster.name + ": leases resume");
  known.failing = false;
  if (lease.mode() != ClusterMode::leased) lease.set_mode(ClusterMode::leased);
  // The shared bucket short of what was asked: ask again when it should hold the rest, not before
  // (at least one turn later), so that a cluster over its rate costs Redis a call per chunk at most.
  // A wait is at most the retry period: a Redis that says "in a year" does not silence the box that long.
  const auto wait = std::clamp<std::uint64_t>(wait_us, 1000, static_cast<std::uint64_t>(options_.retry.count()));
  known.next_lease = granted < want ? now + std::chrono::microseconds(wait) : now;
}

}  // namespace tricolor::control
