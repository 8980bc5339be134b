// The MPS capability rules against recorded probe values (fixtures/mps/*.toml: [probe] what
// sysctl and LibTorch reported on a Mac, [expect] what the rules must decide).
#include <doctest/doctest.h>

#include <filesystem>

#include <toml++/toml.h>

#include "mps_rules.hpp"

using namespace accelkit::mps;
namespace fs = std::filesystem;

TEST_CASE("version and chip parsing") {
  auto v = parse_version("14.6.1");
  REQUIRE(v);
  CHECK(v->major == 14);
  CHECK(v->minor == 6);
  CHECK(v->at_least(14, 0));
  CHECK_FALSE(v->at_least(15, 0));
  CHECK(parse_version("15")->major == 15);
  CHECK_FALSE(parse_version("x"));
  CHECK_FALSE(parse_version(""));
  CHECK(chip_family("Apple M1") == ChipFamily::m1);
  CHECK(chip_family("Apple M2 Ultra") == ChipFamily::m2);
  CHECK(chip_family("Apple M3 Pro") == ChipFamily::m3);
  CHECK(chip_family("Apple M4 Max") == ChipFamily::m4);
  CHECK(chip_family("Apple M5") == ChipFamily::m5_or_newer);
  CHECK(chip_family("Intel(R) Core(TM) i7-8559U") == ChipFamily::intel);
  CHECK(chip_family("") == ChipFamily::unknown);
}

TEST_CASE("recorded Macs: M1, M2, M3, M4 and an Intel Mac") {
  const fs::path dir = fs::path(ACCELKIT_TEST_FIXTURES) / "mps";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    CAPTURE(entry.path().filename().string());
    toml::table t = toml::parse_file(entry.path().string());
    MpsProbeValues v;
    v.brand = t["probe"]["brand"].value_or(std::string());
    v.hw_model = t["probe"]["hw_model"].value_or(std::string());
    v.os_version = t["probe"]["os_version"].value_or(std::string());
    v.memory_bytes = t["probe"]["memory_bytes"].value_or(std::uint64_t{0});
    v.mps_available = t["probe"]["mps_available"].value_or(false);
    auto torch = parse_version(t["probe"]["torch"].value_or(std::string()));
    REQUIRE(torch);
    v.torch = *torch;

    MpsCapabilities c = mps_capabilities(v);
    CHECK(to_string(c.chip) == t["expect"]["chip"].value_or(std::string("?")));
    CHECK(c.dtype == t["expect"]["dtype"].value_or(std::string("?")));
    CHECK(c.autocast == t["expect"]["autocast"].value_or(true));
    CHECK(c.fp16 == t["expect"]["fp16"].value_or(true));
    CHECK(c.bf16 == t["expect"]["bf16"].value_or(true));
    CHECK(c.fused_adamw == t["expect"]["fused_adamw"].value_or(true));
    const std::string reason = t["expect"]["reason"].value_or(std::string("?"));
    bool found = false;
    for (const auto& r : c.reasons) found |= r.find(reason) != std::string::npos;
    CHECK_MESSAGE(found, "no reason mentions '" << reason << "'");
  }
  CHECK(files >= 6);
}
