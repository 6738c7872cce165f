// load() runs a text on its indexed draft (control/language/draft.hpp), execute() one command on the policy
// itself: a text loads to the policy its lines make one by one, through churn that makes the draft
// close up the holes deletes leave; list and show lines in a file are checked but print nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/language/language.hpp"
#include "dataplane/replay/splitmix64.hpp"
#include "language_test_support.hpp"

namespace tricolor::control {
namespace {

using testing::kBaseConfig;
using testing::must_load;

// Mostly adds and deletes of profiles and color maps (a small pool of names, so names come back after
// a delete and go last), rules that use them, and moves; thousands of holes in a few hundred names.
std::string churn_command(SplitMix64& r) {
  const std::string profile = "p" + std::to_string(r.below(300));
  const std::string map = "m" + std::to_string(r.below(300));
  const std::string rule = "r" + std::to_string(r.below(100));
  switch (r.below(10)) {
    case 0: case 1: return "profile add " + profile + " srtcm cir " + std::to_string(1 + r.below(99)) + "mbit cbs 1k";
    case 2: case 3: return "profile delete " + profile;
    case 4: return "profile change " + profile + " 1r2c cir " + std::to_string(1 + r.below(99)) + "kbit cbs 2k";
    case 5: return "color-map add " + map + " dscp red " + std::to_string(r.below(64));
    case 6: return "color-map delete " + map;
    case 7: return "color-map change " + map + " dscp yellow " + std::to_string(r.below(64));
    case 8: {
      static const char* const kWhere[] = {"", " first", " last", " before r", " after r"};
      std::string where = kWhere[r.below(5)];
      if (where.back() == 'r') where += std::to_string(r.below(100));
      return "rule " + std::string(r.chance(50) ? "add " : "change ") + rule + where + " profile " + profile +
             (r.chance(50) ? " input map dscp-map " + map : "");
    }
    default: return "rule delete " + rule;
  }
}

TEST(LanguageLoad, ATextLoadsToWhatItsLinesMakeOneByOne) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SplitMix64 r{seed};
    dataplane::Policy policy;
    std::string text;
    std::size_t lines = 0, deletes = 0;
    while (lines < 5000) {
      const std::string line = churn_command(r);
      if (!execute(policy, line)) continue;  // only lines that succeed: a failing one stops a load
      text.append(line).append("\n");
      ++lines;
      deletes += line.find(" delete ") != std::string::npos;
    }
    ASSERT_GT(deletes, 1000u);
    const auto loaded = load(text);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    ASSERT_EQ(*loaded, policy) << "seed " << seed;
  }
}

TEST(LanguageLoad, ListAndShowAreCheckedInAFile) {
  const dataplane::Policy base = must_load(kBaseConfig);
  EXPECT_EQ(must_load("show\nrule list\nprofile list\ncolor-map list\nrule add r profile gold\nshow\n", base),
            must_load("rule add r profile gold\n", base));
  EXPECT_EQ(load("rule list\nshow all\n", base).error().message,
            "line 2: 'all': unexpected after 'show': the command ends there");
  EXPECT_EQ(load("profile list gold\n", base).error().message,
            "line 1: 'gold': unexpected after 'list': the command ends there");
}

}  // namespace
}  // namespace tricolor::control
