// ROCm architecture logic without hardware: gfx_target_version decoding, the per-family
// precision rules, the precision plan, and the presets data file.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "arch_rules.hpp"
#include "gfx_target.hpp"
#include "precision_plan.hpp"
#include "presets.hpp"
#include "rocm_monitor.hpp"

using namespace accelkit;
using namespace accelkit::rocm;

namespace {
GfxTarget gfx(const char* name) {
  auto t = parse_gfx_name(name);
  REQUIRE_MESSAGE(t, name);
  return *t;
}
constexpr std::uint64_t kGiB = 1024ull * 1024 * 1024;
}  // namespace

TEST_CASE("gfx_target_version: major*10000 + minor*100 + stepping, stepping in hex in the name") {
  struct Case { long long v; const char* name; ArchFamily family; };
  for (const Case& c : {Case{90010, "gfx90a", ArchFamily::cdna2}, Case{90402, "gfx942", ArchFamily::cdna3},
                        Case{90008, "gfx908", ArchFamily::cdna1}, Case{90006, "gfx906", ArchFamily::gcn5},
                        Case{100100, "gfx1010", ArchFamily::rdna1}, Case{100102, "gfx1012", ArchFamily::rdna1},
                        Case{100300, "gfx1030", ArchFamily::rdna2}, Case{110000, "gfx1100", ArchFamily::rdna3},
                        Case{110501, "gfx1151", ArchFamily::rdna3_5}, Case{120001, "gfx1201", ArchFamily::rdna4}}) {
    auto t = decode_gfx_target_version(c.v);
    REQUIRE(t);
    CHECK(t->name() == c.name);
    CHECK(t->family() == c.family);
    auto back = parse_gfx_name(c.name);
    REQUIRE(back);
    CHECK(*back == *t);
  }
  CHECK_FALSE(decode_gfx_target_version(0));  // CPU node
  CHECK_FALSE(decode_gfx_target_version(-5));
  CHECK_FALSE(parse_gfx_name("gpu1010"));
  CHECK_FALSE(parse_gfx_name("gfx1z10"));
  CHECK(decode_gfx_target_version(80003)->family() == ArchFamily::unknown);  // gfx803 (Polaris)
}

TEST_CASE("architecture rules: CDNA2/3 and RDNA3 bf16, RDNA2 fp16, RDNA1 fp32 with workarounds") {
  for (const char* bf16_arch : {"gfx90a", "gfx942", "gfx1100", "gfx1101"}) {
    ArchRules r = arch_rules(gfx(bf16_arch));
    CAPTURE(bf16_arch);
    CHECK(r.dtype == Dtype::bf16);
    CHECK(r.bf16);
    CHECK(r.fp16);
    CHECK_FALSE(r.fft_on_cpu);
    CHECK_FALSE(r.disable_hipblaslt);
    CHECK(r.memory_fraction == 1.0);
    CHECK(arch_environment(r).empty());
  }
  ArchRules rdna2 = arch_rules(gfx("gfx1030"));
  CHECK(rdna2.dtype == Dtype::fp16);
  CHECK_FALSE(rdna2.bf16);
  CHECK(rdna2.fp16);

  ArchRules rdna1 = arch_rules(gfx("gfx1010"));
  CHECK(rdna1.family == ArchFamily::rdna1);
  CHECK(rdna1.dtype == Dtype::fp32);
  CHECK_FALSE(rdna1.bf16);
  CHECK_FALSE(rdna1.fp16);
  CHECK(rdna1.fft_on_cpu);
  CHECK(rdna1.disable_hipblaslt);
  CHECK(rdna1.memory_fraction < 1.0);
  CHECK(rdna1.memory_fraction >= 0.5);
  auto env = arch_environment(rdna1);
  REQUIRE(env.size() == 2);
  CHECK(env[0].name == "TORCH_BLAS_PREFER_HIPBLASLT");
  CHECK(env[0].value == "0");
  CHECK(rdna1.reasons.size() >= 3);

  ArchRules unknown = arch_rules(gfx("gfx803"));
  CHECK(unknown.dtype == Dtype::fp32);
  REQUIRE_FALSE(unknown.reasons.empty());
  CHECK(unknown.reasons.front().find("gfx803") != std::string::npos);
}

TEST_CASE("precision plan: auto follows the rules; an unsupported explicit request is refused") {
  PrecisionRequest req;
  auto mi210 = plan_rocm_precision(req, arch_rules(gfx("gfx90a")), "rocm:0");
  REQUIRE(mi210.ok());
  CHECK(mi210->dtype == Dtype::bf16);
  CHECK(mi210->autocast);
  CHECK_FALSE(mi210->loss_scaling);
  CHECK_FALSE(mi210->tf32);

  auto rdna2 = plan_rocm_precision(req, arch_rules(gfx("gfx1030")), "rocm:0");
  REQUIRE(rdna2.ok());
  CHECK(rdna2->dtype == Dtype::fp16);
  CHECK(rdna2->loss_scaling);

  auto rdna1 = plan_rocm_precision(req, arch_rules(gfx("gfx1010")), "rocm:0");
  REQUIRE(rdna1.ok());
  CHECK(rdna1->dtype == Dtype::fp32);
  CHECK_FALSE(rdna1->autocast);
  bool env_reason = false;
  for (const auto& r : rdna1->reasons) env_reason |= r.find("TORCH_BLAS_PREFER_HIPBLASLT=0") != std::string::npos;
  CHECK(env_reason);

  req.precision = Dtype::bf16;
  auto refused = plan_rocm_precision(req, arch_rules(gfx("gfx1010")), "rocm:0 RX 5600 XT");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::not_supported);
  CHECK(refused.status().message().find("RDNA1") != std::string::npos);
  req.precision = Dtype::fp16;
  CHECK_FALSE(plan_rocm_precision(req, arch_rules(gfx("gfx1010")), "x").ok());
  CHECK(plan_rocm_precision(req, arch_rules(gfx("gfx90a")), "x").ok());
  req.precision = Dtype::fp32;
  auto fp32 = plan_rocm_precision(req, arch_rules(gfx("gfx90a")), "x");
  REQUIRE(fp32.ok());
  CHECK_FALSE(fp32->autocast);
  req.precision.reset();
  req.tf32 = Toggle::on;
  CHECK_FALSE(plan_rocm_precision(req, arch_rules(gfx("gfx90a")), "x").ok());
}

TEST_CASE("presets: the data file parses, the built-in copy is the same file, classes by VRAM") {
  std::ifstream in(ACCELKIT_ROCM_PRESETS_FILE);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(builtin_presets_text() == text.str());
  PresetTable t = parse_presets(text.str(), "presets.toml");
  REQUIRE(t.classes.size() >= 3);

  auto p6 = select_preset(t, 6 * kGiB, 0x1234, "gfx1030");
  auto p12 = select_preset(t, 12 * kGiB, 0x1234, "gfx1030");
  auto p24 = select_preset(t, 24 * kGiB, 0x1234, "gfx1100");
  REQUIRE(p6);
  REQUIRE(p12);
  REQUIRE(p24);
  CHECK(p6->name == "6GB");
  CHECK(p12->name == "12GB");
  CHECK(p24->name == "24GB");
  CHECK(p6->model_width < p12->model_width);
  CHECK(p12->model_width < p24->model_width);
  CHECK(p6->batch_size * p6->grad_accumulation == p12->batch_size * p12->grad_accumulation);
  auto p64 = select_preset(t, 64 * kGiB, 0x740f, "gfx90a");
  REQUIRE(p64);
  CHECK(p64->model_width >= p24->model_width);

  // Device entries: a specific card wins over its architecture's entry.
  auto navi10 = select_preset(t, 6 * kGiB, 0x731f, "gfx1010");
  auto other_rdna1 = select_preset(t, 8 * kGiB, 0x7340, "gfx1012");
  REQUIRE(navi10);
  REQUIRE(other_rdna1);
  CHECK(navi10->model_width < p6->model_width);
  CHECK(navi10->why.find("RX 5600 XT") != std::string::npos);
  CHECK(other_rdna1->why.find("gfx101*") != std::string::npos);
  CHECK(other_rdna1->model_width == p6->model_width);  // the class's width, the entry's batch
  CHECK(other_rdna1->batch_size < p6->batch_size);
}

TEST_CASE("presets: bad data is refused with file:line:column") {
  auto error_of = [](const char* text) -> std::string {
    try {
      parse_presets(text, "p.toml");
    } catch (const PresetError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of("[[class]]\nname = \"a\"\nbatch_size = 0\nmodel_width = 4\n").find("p.toml:3:") == 0);
  CHECK(error_of("[[class]]\nname = \"a\"\nbatch_size = 8\nmodel_width = 4\nwidth = 3\n").find("unknown key 'width'") !=
        std::string::npos);
  CHECK(error_of("[[class]\n").find("p.toml:1:") == 0);
  CHECK(error_of("[[device]]\nbatch_size = 8\n").find("pci_device_id or gfx") != std::string::npos);
  CHECK(error_of("[[class]]\nname = \"a\"\nbatch_size = 8\nmodel_width = 4\n[[class]]\nname = \"b\"\n"
                 "max_vram_gib = 8\nbatch_size = 8\nmodel_width = 4\n")
            .find("increasing") != std::string::npos);
}

TEST_CASE("pp_dpm_* current level") {
  CHECK(current_dpm_mhz("0: 800Mhz\n1: 1375Mhz\n2: 1750Mhz *\n") == doctest::Approx(1750));
  CHECK(current_dpm_mhz("0: 500Mhz *\n1: 2482Mhz\n") == doctest::Approx(500));
  CHECK_FALSE(current_dpm_mhz("0: 500Mhz\n1: 2482Mhz\n"));
  CHECK_FALSE(current_dpm_mhz(""));
}
