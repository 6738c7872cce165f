// Flows per key (issue 27, `per src max-flows N`): tricolor-replay, the real binary, against a model
// written from the text, not from the engine: per key, a map of its open flows.
//
//   A TCP flow opens at its SYN and closes at FIN or RST (or its idle timeout); a UDP or other flow
//   opens at its first packet and closes at its idle timeout. A packet of a new flow whose key already
//   has N open flows gets red (dropped) and opens nothing; packets of open flows are metered as usual.
//   (doc/language.md adds: a TCP packet of no open flow that is not a SYN opens nothing and is metered;
//   a new flow that finds the worker's flow table full is refused too.)
//
// The model closes every idle flow at every packet, and the engine must agree exactly: it closes idle
// flows lazily, but before it refuses a flow it closes every flow idle at that packet's tick (a timing
// wheel of deadlines, flow_table.hpp). The first test's capture is made of phases shorter than the
// flow timeout separated by quiet gaps (from when the engine's sweep lagged); the second's flows time
// out all the time, in a flow table far too large for any sweep to reach an idle flow in time.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tests/control/replay/replay_test_support.hpp"

namespace tricolor::test {
namespace {

constexpr std::uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;
constexpr std::uint64_t kSecond = 1'000'000'000;
constexpr std::uint64_t kStart = 1'700'000'000 * kSecond;
constexpr std::uint64_t kFlowTimeout = kSecond;  // flow-timeout 1s
constexpr std::size_t kFlowCapacity = 10;         // flow-capacity 10 (one worker in tricolor-replay)

struct Offered {
  std::uint8_t source;  // 10.0.0.<source>
  bool tcp;
  std::uint16_t sport;
  std::uint8_t flags;  // TCP
  bool filler = false;  // to 10.99.0.1: the other rule, an aggregate meter
};

std::vector<std::uint8_t> frame_of(const Offered& o) {
  FrameSpec s;
  s.src = {10, 0, 0, o.source};
  s.dst = o.filler ? std::array<std::uint8_t, 16>{10, 99, 0, 1} : std::array<std::uint8_t, 16>{10, 1, 0, 1};
  s.protocol = o.tcp ? 6 : 17;
  s.sport = o.sport;
  s.dport = 443;
  s.size = 100;
  auto f = build_frame(s);
  if (o.tcp) f[14 + 20 + 13] = o.flags;  // Ethernet, IPv4 without options, then the TCP flags byte
  return f;
}

// The model: per key, its open flows and the time of each one's latest packet.
class FlowModel {
 public:
  using Flow = std::tuple<std::uint8_t, bool, std::uint16_t>;  // source, tcp, source port (the rest fixed)
  explicit FlowModel(std::size_t max_flows, std::size_t capacity = kFlowCapacity)
      : max_flows_(max_flows), capacity_(capacity) {}

  void set_max_flows(std::size_t n) { max_flows_ = n; }
  void set_prefix24(bool yes) { prefix24_ = yes; }
  void forget_all() { open_.clear(); }  // a change of the key definition starts flows afresh

  // Whether the packet is refused.
  bool packet(const Offered& o, std::uint64_t t) {
    for (auto& [key, flows] : open_)  // idle flows are closed, every key's: the flow table is shared
      std::erase_if(flows, [&](const auto& f) { return t - f.second >= kFlowTimeout; });
    auto& flows = open_[prefix24_ ? 0 : o.source];
    const Flow flow{o.source, o.tcp, o.sport};
    const bool ends = o.tcp && (o.flags & (kFin | kRst)) != 0;
    if (auto it = flows.find(flow); it != flows.end()) {
      it->second = t;
      if (ends) flows.erase(it), ++closed;
      return false;
    }
    const bool opens = !o.tcp || ((o.flags & kSyn) != 0 && !ends);
    if (!opens) return false;
    if (flows.size() >= max_flows_) return ++refused, true;
    std::size_t total = 0;
    for (const auto& [key, f] : open_) total += f.size();
    if (total >= capacity_) return ++refused, ++table_full, true;
    flows[flow] = t;
    ++opened;
    return false;
  }
  std::size_t open_of(std::uint8_t source) const {
    const auto it = open_.find(prefix24_ ? 0 : source);
    return it == open_.end() ? 0 : it->second.size();
  }

  std::uint64_t opened = 0, closed = 0, refused = 0, table_full = 0;

 private:
  std::size_t max_flows_;
  std::size_t capacity_;
  bool prefix24_ = false;
  std::map<std::uint8_t, std::map<Flow, std::uint64_t>> open_;
};

std::string rule_text(std::size_t max_flows, bool prefix24) {
  return "flows dst 10.1.0.0/16 per src" + std::string(prefix24 ? "/24" : "") + " max-flows " +
         std::to_string(max_flows) + " flow-timeout 1s flow-capacity 10 profile big";
}

// One JSON number field after `"name": ` within the text that follows `after`.
std::optional<std::uint64_t> json_number(const std::string& json, const std::string& after, const std::string& name) {
  const std::size_t from = json.find(after);
  if (from == std::string::npos) return std::nullopt;
  const std::string needle = "\"" + name + "\":";
  std::size_t at = json.find(needle, from);
  if (at == std::string::npos) return std::nullopt;
  at += needle.size();
  while (at < json.size() && json[at] == ' ') ++at;
  return std::stoull(json.substr(at));
}

// tricolor-replay over DIR/in.pcap with DIR/policy: DIR/out.csv and DIR/out.json, every key.
CommandResult replay_in(const std::filesystem::path& dir) {
  return run(replay_binary() + " --policy " + (dir / "policy").string() + " --in " + (dir / "in.pcap").string() +
             " --csv " + (dir / "out.csv").string() + " --json " + (dir / "out.json").string() + " --all-keys");
}

TEST(ReplayFlows, OpensClosesTimeoutsFloodsAndChangesEqualTheModel) {
  ScratchDir dir("tricolor-replay-flows");
  // Traffic, phase by phase; `changes` are (packet index, the rule's new max-flows, per src/24).
  std::vector<Packet> packets;
  std::vector<Offered> offered;
  std::uint64_t t = kStart;
  const auto send = [&](const Offered& o, std::uint64_t gap_ns = 1'000'000) {
    t += gap_ns;
    packets.push_back({t, frame_of(o)});
    offered.push_back(o);
  };
  const auto quiet = [&] {  // past every flow's timeout, then fillers over which the sweep closes them
    t += kFlowTimeout + kSecond / 5;
    for (int i = 0; i < 320; ++i) send({1, false, 9, 0, true}, 1000);
  };

  // Phase 1, by hand: a SYN flood from source 1 (200 SYNs) held at 3 open flows; an ACK of a refused
  // flow opens nothing; FIN and RST close (the key may open again), a flow that closes reopens;
  // a retransmitted SYN of an open flow is its packet; UDP flows of source 2 open at their first packet.
  for (std::uint16_t p = 0; p < 200; ++p) send({1, true, std::uint16_t(1000 + p), kSyn}, 200'000);
  send({1, true, 1001, kAck});        // open flow
  send({1, true, 1100, kAck});        // refused flow's ACK: metered, opens nothing
  send({1, true, 1000, kSyn});        // retransmitted SYN of an open flow
  send({1, true, 1000, kFin | kAck}); // closes 1000
  send({1, true, 1150, kSyn});        // opens (2 of 3 were open)
  send({1, true, 1151, kSyn});        // refused
  send({1, true, 1001, kRst});        // closes 1001
  send({1, true, 1000, kSyn});        // 1000 again: reopens
  send({1, true, 1152, kSyn | kFin}); // a SYN with FIN opens nothing
  for (std::uint16_t p = 0; p < 5; ++p)
    for (int k = 0; k < 3; ++k) send({2, false, std::uint16_t(5000 + p), 0});  // 3 open, the rest refused
  // A flow idle past its timeout, its key busy meanwhile: its own next packet finds it closed.
  send({3, true, 7000, kSyn});
  send({3, true, 7001, kSyn});
  send({3, true, 7002, kSyn});
  for (int i = 0; i < 12; ++i) send({3, true, 7001, kAck}, kSecond / 10);  // 7000 and 7002 idle 1.2 s
  send({3, true, 7000, kAck});  // closed at its own packet, idle: opens nothing (not a SYN), metered
  send({3, true, 7000, kSyn});  // opens again
  quiet();

  // Random phases: 6 sources, TCP and UDP, up to 8 ports each; phases under the flow timeout.
  Rng rng{2027};
  std::vector<std::tuple<std::size_t, std::size_t, bool>> changes;
  for (int phase = 0; phase < 8; ++phase) {
    if (phase == 3) changes.emplace_back(offered.size() + 40, 5, false);  // raise N mid-phase: flows kept
    if (phase == 5) changes.emplace_back(offered.size() + 40, 2, false);  // lower it below what keys have
    if (phase == 6) changes.emplace_back(offered.size() + 40, 4, true);   // per src/24: flows start afresh
    for (int i = 0; i < 400; ++i) {
      Offered o{std::uint8_t(1 + rng.below(6)), rng.below(3) != 0, std::uint16_t(2000 + rng.below(8)), 0};
      if (o.tcp) {
        const std::uint64_t r = rng.below(10);
        o.flags = r < 4 ? kSyn : r < 8 ? kAck : r == 8 ? (kFin | kAck) : kRst;
      }
      send(o, 100'000 + rng.below(1'900'000));  // 0.1 to 2 ms apart: a phase is under 0.8 s
    }
    quiet();
  }

  write_pcap(dir.path / "in.pcap", packets);
  std::ofstream(dir.path / "policy") << "profile add big 1r2c cir 10gbit cbs 10m\n"
                                        "rule add filler dst 10.99.0.0/16 profile big\n"
                                        "rule add " + rule_text(3, false) + "\n";
  std::string command = replay_binary() + " --policy " + (dir.path / "policy").string() + " --in " +
                        (dir.path / "in.pcap").string() + " --csv " + (dir.path / "out.csv").string() + " --json " +
                        (dir.path / "out.json").string() + " --all-keys";
  for (const auto& [index, n, prefix24] : changes)
    command += " --change-at '" + std::to_string(index) + ":rule change " + rule_text(n, prefix24) + "'";
  const CommandResult result = run(command);
  ASSERT_EQ(result.status, 0) << result.output;

  const auto rows = read_csv(dir.path / "out.csv");
  ASSERT_EQ(rows.size(), packets.size() + 1);
  FlowModel model(3);
  std::size_t next_change = 0, refused_syns_of_flood = 0, green_syns_of_flood = 0;
  for (std::size_t k = 0; k < packets.size(); ++k) {
    if (next_change < changes.size() && std::get<0>(changes[next_change]) == k) {
      const auto& [index, n, prefix24] = changes[next_change++];
      model.set_max_flows(n);
      if (prefix24) model.set_prefix24(true), model.forget_all();
    }
    const Offered& o = offered[k];
    const auto& row = rows[k + 1];
    ASSERT_GE(row.size(), 6u);
    if (o.filler) {
      ASSERT_EQ(row[1], "filler") << "packet " << k;
      continue;
    }
    const bool refused = model.packet(o, packets[k].time_ns);
    ASSERT_EQ(row[1], "flows") << "packet " << k;
    ASSERT_EQ(row[4], refused ? "red" : "green") << "packet " << k << " source " << int(o.source) << " port " << o.sport;
    ASSERT_EQ(row[5], refused ? "drop;flow-refused" : "forward") << "packet " << k;
    if (k < 200) (refused ? refused_syns_of_flood : green_syns_of_flood) += 1;
  }
  EXPECT_EQ(green_syns_of_flood, 3u);  // the flood held at N
  EXPECT_EQ(refused_syns_of_flood, 197u);
  EXPECT_GT(model.table_full, 0u) << "the random phases should fill the flow table at times";
  EXPECT_GT(model.closed, 20u);

  const std::string json = slurp(dir.path / "out.json");
  // Rule counters are the rule's, by name, whatever its tables: the model's totals.
  EXPECT_EQ(json_number(json, "\"max_per_key\"", "opened"), model.opened) << json;
  EXPECT_EQ(json_number(json, "\"max_per_key\"", "refused_packets"), model.refused);
  EXPECT_EQ(json_number(json, "\"max_per_key\"", "closed"), model.closed);
  EXPECT_EQ(json_number(json, "\"max_per_key\"", "table_full_packets"), model.table_full);
}

// Refusals are exact: a key at max-flows with a flow idle past flow-timeout admits a new flow at the
// first packet after the timeout, though nothing else came that could have closed the idle one (few
// packets, a flow table of 2 Mi slots: the old sweep, 64 slots a burst, reached a flow after some
// 32 000 bursts). Then random traffic whose flows time out all the time, against the model.
TEST(ReplayFlows, AFlowIdlePastItsTimeoutMakesRoomAtOnce) {
  ScratchDir dir("tricolor-replay-flows-exact");
  std::vector<Packet> packets;
  std::vector<Offered> offered;
  const auto at = [&](std::uint64_t time, const Offered& o) {
    packets.push_back({time, frame_of(o)});
    offered.push_back(o);
  };
  constexpr std::uint64_t kMs = 1'000'000;
  std::uint64_t t = kStart;
  at(t, {1, false, 100, 0});                       // opens: 1 of 2
  at(t + kMs, {1, false, 101, 0});                 // opens: 2 of 2
  at(t + 999 * kMs, {1, false, 102, 0});           // refused: 100 idle 999 ms
  at(t + kSecond, {1, false, 102, 0});             // 100 idle 1 s: closed, 102 opens
  at(t + kSecond + kMs / 2, {1, false, 103, 0});   // refused: 101 idle 999.5 ms
  at(t + kSecond + kMs, {1, true, 103, kSyn});     // 101 idle 1 s: a SYN opens
  at(t + kSecond + 2 * kMs, {1, true, 104, kSyn}); // refused
  at(t + 3 * kSecond, {1, true, 104, kSyn});       // both idle: opens
  at(t + 3 * kSecond, {1, true, 105, kSyn});       // opens (the other was closed with it)
  at(t + 3 * kSecond + 1, {1, true, 106, kSyn});   // refused
  t += 4 * kSecond;
  Rng rng{2028};
  for (int i = 0; i < 3000; ++i) {  // 4 sources, 6 ports each, 0 to 400 ms apart: flows time out often
    Offered o{std::uint8_t(1 + rng.below(4)), rng.below(3) != 0, std::uint16_t(3000 + rng.below(6)), 0};
    if (o.tcp) {
      const std::uint64_t r = rng.below(10);
      o.flags = r < 5 ? kSyn : r < 8 ? kAck : r == 8 ? (kFin | kAck) : kRst;
    }
    t += rng.below(400 * kMs);
    at(t, o);
  }
  write_pcap(dir.path / "in.pcap", packets);
  std::ofstream(dir.path / "policy")
      << "profile add big 1r2c cir 10gbit cbs 10m\n"
         "rule add flows dst 10.1.0.0/16 per src timeout 1h max-flows 2 flow-timeout 1s flow-capacity 1m profile big\n";
  const CommandResult result = replay_in(dir.path);
  ASSERT_EQ(result.status, 0) << result.output;
  const auto rows = read_csv(dir.path / "out.csv");
  ASSERT_EQ(rows.size(), packets.size() + 1);
  const std::vector<bool> by_hand{false, false, true, false, true, false, true, false, false, true};
  FlowModel model(2, 1u << 20);
  std::uint64_t refused_late = 0;
  for (std::size_t k = 0; k < packets.size(); ++k) {
    const bool refused = model.packet(offered[k], packets[k].time_ns);
    if (k < by_hand.size()) ASSERT_EQ(refused, by_hand[k]) << "the model, packet " << k;
    else refused_late += refused;
    const auto& row = rows[k + 1];
    ASSERT_GE(row.size(), 6u);
    ASSERT_EQ(row[4], refused ? "red" : "green") << "packet " << k << " source " << int(offered[k].source) << " port "
                                                 << offered[k].sport;
    ASSERT_EQ(row[5], refused ? "drop;flow-refused" : "forward") << "packet " << k;
  }
  EXPECT_GT(refused_late, 100u);
  EXPECT_EQ(model.table_full, 0u);
  const std::string json = slurp(dir.path / "out.json");
  EXPECT_EQ(json_number(json, "\"max_per_key\"", "opened"), model.opened) << json;
  EXPECT_EQ(json_number(json, "\"max_per_key\"", "refused_packets"), model.refused);
  EXPECT_EQ(json_number(json, "\"max_per_key\"", "closed"), model.closed);
}

// flow-excess: a refused flow's packet takes that color's action, unmetered, and is counted refused.
// Yellow with a remark: forwarded, remarked; green: a dry run that counts refusals and passes all.
TEST(ReplayFlows, FlowExcessGivesRefusedPacketsItsColorAndAction) {
  for (const std::string excess : {"yellow", "green"}) {
    ScratchDir dir("tricolor-replay-flow-excess");
    std::vector<Packet> packets;
    std::uint64_t t = kStart;
    for (std::uint16_t p = 0; p < 6; ++p) packets.push_back({t += 1000, frame_of({1, true, std::uint16_t(100 + p), kSyn})});
    packets.push_back({t += 1000, frame_of({1, true, 100, kAck})});  // an admitted flow's packet
    write_pcap(dir.path / "in.pcap", packets);
    std::ofstream(dir.path / "policy") << "profile add big 1r2c cir 10gbit cbs 10m\n"
                                          "rule add flows dst 10.1.0.0/16 per src max-flows 2 flow-excess " + excess +
                                              " profile big yellow remark 10\n";
    const CommandResult result = replay_in(dir.path);
    ASSERT_EQ(result.status, 0) << result.output;
    const auto rows = read_csv(dir.path / "out.csv");
    ASSERT_EQ(rows.size(), packets.size() + 1);
    const std::string refused_action = excess == "yellow" ? "forward;dscp=10;flow-refused" : "forward;flow-refused";
    for (std::size_t k = 0; k < packets.size(); ++k) {
      const bool refused = k >= 2 && k < 6;
      ASSERT_EQ(rows[k + 1][4], refused ? excess : "green") << excess << " packet " << k;
      ASSERT_EQ(rows[k + 1][5], refused ? refused_action : "forward") << excess << " packet " << k;
    }
    const std::string json = slurp(dir.path / "out.json");
    EXPECT_EQ(json_number(json, "\"max_per_key\"", "opened"), 2u) << json;
    EXPECT_EQ(json_number(json, "\"max_per_key\"", "refused_packets"), 4u);
  }
}

}  // namespace
}  // namespace tricolor::test
