// The SDK's host-file reader (accelkit/sdk/support/host_file.hpp): regular files only, never a
// blocking open or read, bounded size, errno kept, strict number parsing.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <chrono>
#include <fstream>
#include <string>

#include "accelkit/sdk/support/host_file.hpp"
#include "accelkit/sdk/support/plausible.hpp"
#include "test_support.hpp"

using namespace accelkit;
using accelkit::test::TempDir;

namespace {
void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}
}  // namespace

TEST_CASE("a regular file is read whole, up to the limit") {
  TempDir dir;
  const std::string small = dir.str() + "/small";
  write(small, "  42000\nsecond line\n");
  host::ReadResult r = host::read_file(small);
  REQUIRE(r.ok());
  CHECK(r.text == "  42000\nsecond line\n");
  CHECK_FALSE(r.truncated);
  CHECK(host::read_line(small) == std::optional<std::string>("42000"));
  CHECK(host::read_int(small) == std::optional<std::int64_t>(42000));

  const std::string big = dir.str() + "/big";
  write(big, std::string(3 * 4096 + 7, 'x'));
  host::ReadResult capped = host::read_file_upto(big, 5000);
  REQUIRE(capped.ok());
  CHECK(capped.truncated);
  CHECK(capped.text.size() == 5000);
  host::ReadResult exact = host::read_file_upto(big, 3 * 4096 + 7);
  CHECK_FALSE(exact.truncated);
  CHECK(exact.text.size() == 3 * 4096 + 7);
}

TEST_CASE("a FIFO, a socket or a directory is refused at once, never waited on") {
  TempDir dir;
  const std::string fifo = dir.str() + "/energy_uj";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  host::ReadResult r = host::read_file(fifo);  // a blocking open would wait for a writer forever
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(r.error == host::kNotRegular);
  CHECK(host::error_text(r.error) == "not a regular file");
  CHECK_FALSE(host::read_int(fifo));

  const std::string sock = dir.str() + "/sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  sock.copy(addr.sun_path, sizeof addr.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  CHECK(host::read_file(sock).error != 0);  // a socket cannot even be opened
  ::close(fd);

  CHECK(host::read_file(dir.str()).error == host::kNotRegular);
}

TEST_CASE("errno is kept for missing and unreadable files") {
  TempDir dir;
  CHECK(host::read_file(dir.str() + "/missing").error == ENOENT);
  CHECK_FALSE(host::read_line(dir.str() + "/missing"));
  const std::string locked = dir.str() + "/locked";
  write(locked, "1\n");
  ::chmod(locked.c_str(), 0);
  if (::geteuid() != 0) CHECK(host::read_file(locked).error == EACCES);  // root reads anything
  CHECK_FALSE(host::error_text(EACCES).empty());
}

TEST_CASE("numbers: one value, whitespace allowed, overflow refused") {
  CHECK(host::parse_int(" 17 \n") == std::optional<std::int64_t>(17));
  CHECK(host::parse_int("-3") == std::optional<std::int64_t>(-3));
  CHECK_FALSE(host::parse_int(""));
  CHECK_FALSE(host::parse_int("12 kB"));
  CHECK_FALSE(host::parse_int("99999999999999999999"));
  CHECK(host::parse_hex32("0x10de\n") == std::optional<std::uint32_t>(0x10de));
  CHECK(host::parse_hex32("1002") == std::optional<std::uint32_t>(0x1002));
  CHECK_FALSE(host::parse_hex32("0x100000000"));
  CHECK_FALSE(host::parse_hex32("-1"));
  CHECK_FALSE(host::parse_hex32("zz"));
  CHECK(host::first_line("  a b \nc") == "a b");
  CHECK(host::trim(" \t\n") == "");
}

TEST_CASE("list_dir: sorted names without . and ..") {
  TempDir dir;
  write(dir.str() + "/b", "");
  write(dir.str() + "/a", "");
  dir.make_dir("c");
  CHECK(host::list_dir(dir.str()) == std::vector<std::string>{"a", "b", "c"});
  CHECK(host::list_dir(dir.str() + "/missing").empty());
  CHECK(host::exists(dir.str() + "/a"));
  CHECK_FALSE(host::exists(dir.str() + "/missing"));
}

TEST_CASE("refusal(): what is worth telling names the file and what it is; an absent file is not") {
  TempDir dir;
  const std::string fifo = dir.str() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const host::ReadResult r = host::read_file(fifo);
  CHECK(r.error == host::kNotRegular);
  CHECK(host::refusal(fifo, r) == "cannot read " + fifo + ": not a regular file (a FIFO)");
  CHECK(host::refusal(dir.str(), host::read_file(dir.str())) ==
        "cannot read " + dir.str() + ": not a regular file (a directory)");
  CHECK(host::refusal(dir.str() + "/missing", host::read_file(dir.str() + "/missing")).empty());
  write(dir.str() + "/ok", "1\n");
  CHECK(host::refusal(dir.str() + "/ok", host::read_file(dir.str() + "/ok")).empty());
}

TEST_CASE("plausible: each unit's limits, kB that wrap, counters that go back") {
  using namespace accelkit::plausible;
  // Inclusive limits; just outside each is refused with the raw value.
  CHECK(check(150, "C").empty());
  CHECK(check(-40, "C").empty());
  CHECK(check(150.5, "C") == "implausible: 150.5 C (outside -40..150 C)");
  CHECK(check(-40.5, "C") == "implausible: -40.5 C (outside -40..150 C)");
  CHECK(check(1e7, "C") == "implausible: 1e+07 C (outside -40..150 C)");
  CHECK(check(2000, "W").empty());
  CHECK_FALSE(check(2000.1, "W").empty());
  CHECK_FALSE(check(-1, "W").empty());
  CHECK(check(10000, "MHz").empty());
  CHECK_FALSE(check(10001, "MHz").empty());
  CHECK(check(100, "%").empty());
  CHECK_FALSE(check(101, "%").empty());
  CHECK(check(static_cast<double>(kMaxMemoryBytes), "bytes").empty());
  CHECK_FALSE(check(static_cast<double>(kMaxMemoryBytes) * 2, "bytes").empty());
  CHECK_FALSE(check(std::nan(""), "").empty());     // not finite, whatever the unit
  CHECK_FALSE(check(INFINITY, "things").empty());
  CHECK(check(1e300, "things").empty());            // no range for an unknown unit
  // kB x 1024 never wraps: 18014398509481985 kB would be 1024 bytes modulo 2^64.
  CHECK(kib_to_bytes(65536000) == std::optional<std::uint64_t>(std::uint64_t{65536000} * 1024));
  CHECK_FALSE(kib_to_bytes(18014398509481985ull));
  CHECK_FALSE(kib_to_bytes(18446744073709551615ull));
  CHECK(kib_to_bytes(kMaxMemoryBytes / 1024) == std::optional<std::uint64_t>(kMaxMemoryBytes));
  CHECK_FALSE(kib_to_bytes(kMaxMemoryBytes / 1024 + 1));
  CHECK(counter_step(10, 15) == std::optional<std::uint64_t>(5));
  CHECK_FALSE(counter_step(15, 10));
}

TEST_CASE("is_drm_card: cards, not connectors or render nodes") {
  CHECK(host::is_drm_card("card0"));
  CHECK(host::is_drm_card("card12"));
  CHECK_FALSE(host::is_drm_card("card"));
  CHECK_FALSE(host::is_drm_card("card0-DP-1"));
  CHECK_FALSE(host::is_drm_card("renderD128"));
  CHECK_FALSE(host::is_drm_card("version"));
}
