#pragma once
// The tests' inverse of the listener's gzip (control/telemetry/http_reply.hpp): a gzip stream of up to 1 MiB
// of text, inflated with zlib.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace tricolor::test {

inline std::string gunzip(const std::string& packed) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);  // 15 + 16: a gzip header, not zlib's
  std::string out(1 << 20, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  stream.avail_in = static_cast<uInt>(packed.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  inflateEnd(&stream);
  return out;
}

}  // namespace tricolor::test
