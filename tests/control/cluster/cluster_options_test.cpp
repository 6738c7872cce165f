// The lease side's pieces that need no Redis: the chunk a budget is leased in, Redis addresses, the
// password file (hostile files refused at once), the bound said at load.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "control/cluster/cluster_leases.hpp"

namespace tricolor::control {
namespace {

policer::Params budget(policer::Unit unit, std::uint64_t cir, std::uint64_t cbs) {
  return policer::Params{.algorithm = policer::Algorithm::one_rate_two_color, .unit = unit, .cir = cir, .cbs = cbs};
}

TEST(ClusterChunk, TwiceTheRateOverTheRoundTripBetweenAFrameAndTheBurst) {
  using std::chrono::microseconds;
  // 125 MB/s (1 Gbit/s) over 5 ms, twice: 1.25 MB, within CBS 2 MB.
  EXPECT_EQ(cluster_chunk(budget(policer::Unit::bytes, 125'000'000, 2'000'000), microseconds(5000)), 1'250'000u);
  // At most CBS: the shared bucket never holds more.
  EXPECT_EQ(cluster_chunk(budget(policer::Unit::bytes, 125'000'000, 100'000), microseconds(5000)), 100'000u);
  // At least a jumbo frame in byte mode, two packets in packet mode.
  EXPECT_EQ(cluster_chunk(budget(policer::Unit::bytes, 1000, 1'000'000), microseconds(5000)), 9216u);
  EXPECT_EQ(cluster_chunk(budget(policer::Unit::packets, 10, 100), microseconds(5000)), 2u);
  EXPECT_EQ(cluster_chunk(budget(policer::Unit::packets, 1'000'000, 100'000), microseconds(5000)), 10'000u);
  // A CBS smaller than the floor: CBS.
  EXPECT_EQ(cluster_chunk(budget(policer::Unit::bytes, 1000, 1500), microseconds(5000)), 1500u);
}

TEST(ClusterBound, SaidInTokens) {
  EXPECT_EQ(cluster_bound_text("global", budget(policer::Unit::bytes, 500'000, 20'480), 20'000, 3),
            "cluster global: CIR 500000 bytes/s, CBS 20480 bytes, leased in chunks of 20000 bytes: green across the "
            "boxes over any T <= CBS + CIR*T + 3 boxes x 20000 bytes = 80480 bytes + CIR*T");
}

TEST(ClusterAddress, HostPortOrUnixPath) {
  EXPECT_TRUE(check_redis_address("127.0.0.1:6379").ok());
  EXPECT_TRUE(check_redis_address("redis.example:6380").ok());
  EXPECT_TRUE(check_redis_address("unix:/run/redis/redis.sock").ok());
  for (const char* bad : {"127.0.0.1", ":6379", "host:0", "host:65536", "host:63x", "unix:", "host:"})
    EXPECT_FALSE(check_redis_address(bad).ok()) << bad;
  EXPECT_EQ(check_redis_address("host:70000").error().message,
            "--cluster-redis: the port of 'host:70000' is not a number from 1 to 65535");
}

class PasswordFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tricolor-password-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(PasswordFile, FirstLineOfARegularFile) {
  std::ofstream(path("pw")) << "s3cret\nsecond line\n";
  ::chmod(path("pw").c_str(), 0600);
  std::string warning;
  auto read = read_password_file(path("pw"), warning);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, "s3cret");
  EXPECT_TRUE(warning.empty());
  ::chmod(path("pw").c_str(), 0644);
  ASSERT_TRUE(read_password_file(path("pw"), warning).ok());
  EXPECT_EQ(warning, "--cluster-password-file '" + path("pw") + "': others may read it (chmod o-rwx)");
}

TEST_F(PasswordFile, HostileFilesRefusedAtOnce) {
  std::string warning;
  ::mkfifo(path("fifo").c_str(), 0600);  // no writer: reading would block; refused at once instead
  EXPECT_EQ(read_password_file(path("fifo"), warning).error().message,
            "--cluster-password-file '" + path("fifo") + "': not a regular file");
  EXPECT_EQ(read_password_file(dir_, warning).error().message, "--cluster-password-file '" + dir_ + "': not a regular file");
  EXPECT_EQ(read_password_file("/dev/zero", warning).error().message,
            "--cluster-password-file '/dev/zero': not a regular file");
  EXPECT_NE(read_password_file(path("missing"), warning).error().message.find("No such file"), std::string::npos);
  std::ofstream(path("empty")) << "\nsecret on the second line\n";
  EXPECT_EQ(read_password_file(path("empty"), warning).error().message,
            "--cluster-password-file '" + path("empty") + "': its first line is empty");
  std::ofstream(path("big")) << std::string(5000, 'x');
  EXPECT_EQ(read_password_file(path("big"), warning).error().message,
            "--cluster-password-file '" + path("big") + "': larger than 4 KiB, not a password");
}

}  // namespace
}  // namespace tricolor::control
