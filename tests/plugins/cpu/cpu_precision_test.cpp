// The CPU precision rules (plan_cpu_precision) with fake probe results.
#include <doctest/doctest.h>

#include <algorithm>

#include "precision_rules.hpp"

using namespace accelkit;
using namespace accelkit::cpu;

namespace {

CpuProbe probe_with(bool avx512_bf16, bool amx_bf16, int physical_cores = 16) {
  CpuProbe p;
  p.isa.avx2 = true;
  p.isa.avx512f = p.isa.avx512bw = avx512_bf16 || amx_bf16;
  p.isa.avx512_bf16 = avx512_bf16;
  p.isa.amx_bf16 = amx_bf16;
  p.physical_cores = physical_cores;
  p.logical_cores = physical_cores * 2;
  return p;
}

// A PrecisionRequest from the settings' spellings: precision auto | fp32 | bf16 | fp16, tf32
// auto | on | off.
PrecisionRequest request(const std::string& precision, const std::string& tf32 = "auto", int threads = 0) {
  PrecisionRequest r;
  r.precision = dtype_from_string(precision);
  REQUIRE((precision == "auto" || r.precision));
  r.tf32 = tf32 == "on" ? Toggle::on : tf32 == "off" ? Toggle::off : Toggle::automatic;
  REQUIRE((tf32 == "auto" || tf32 == "on" || tf32 == "off"));
  r.threads = threads;
  return r;
}

bool any_reason(const PrecisionPlan& p, const std::string& part) {
  return std::any_of(p.reasons.begin(), p.reasons.end(),
                     [&](const std::string& r) { return r.find(part) != std::string::npos; });
}

}  // namespace

TEST_CASE("auto with AVX512_BF16: bf16 autocast") {
  auto plan = plan_cpu_precision(request("auto"), probe_with(true, false));
  REQUIRE(plan.ok());
  CHECK(plan->dtype == Dtype::bf16);
  CHECK(plan->autocast);
  CHECK_FALSE(plan->tf32);
  CHECK_FALSE(plan->loss_scaling);
  CHECK(any_reason(plan.value(), "AVX512_BF16"));
}

TEST_CASE("auto with AMX-BF16: bf16 autocast, AMX named") {
  auto plan = plan_cpu_precision(request("auto"), probe_with(true, true));
  REQUIRE(plan.ok());
  CHECK(plan->dtype == Dtype::bf16);
  CHECK(any_reason(plan.value(), "AMX-BF16"));
}

TEST_CASE("auto on an Intel CPU with AVX512_BF16 but no AMX: fp32 (bf16 is no faster there), says why; with AMX, "
          "or on AMD, bf16 autocast") {
  CpuProbe intel = probe_with(true, false);
  intel.vendor = "Intel";
  auto plan = plan_cpu_precision(request("auto"), intel);
  REQUIRE(plan.ok());
  CHECK(plan->dtype == Dtype::fp32);
  CHECK_FALSE(plan->autocast);
  CHECK(any_reason(plan.value(), "this Intel CPU has no AMX"));
  // Asked for, bf16 is still given: it is native.
  auto asked = plan_cpu_precision(request("bf16"), intel);
  REQUIRE(asked.ok());
  CHECK(asked->dtype == Dtype::bf16);
  CHECK_FALSE(any_reason(asked.value(), "warning"));

  CpuProbe amx = probe_with(true, true);
  amx.vendor = "Intel";
  auto with_amx = plan_cpu_precision(request("auto"), amx);
  REQUIRE(with_amx.ok());
  CHECK(with_amx->dtype == Dtype::bf16);
  CHECK(any_reason(with_amx.value(), "AMX-BF16"));

  CpuProbe amd = probe_with(true, false);
  amd.vendor = "AMD";
  auto zen = plan_cpu_precision(request("auto"), amd);
  REQUIRE(zen.ok());
  CHECK(zen->dtype == Dtype::bf16);
  CHECK(zen->autocast);
}

TEST_CASE("auto without bf16 hardware: fp32, no autocast, says why") {
  auto plan = plan_cpu_precision(request("auto"), probe_with(false, false));
  REQUIRE(plan.ok());
  CHECK(plan->dtype == Dtype::fp32);
  CHECK_FALSE(plan->autocast);
  CHECK(any_reason(plan.value(), "no AVX512_BF16 or AMX-BF16"));
}

TEST_CASE("explicit fp32 is honoured even with bf16 hardware") {
  auto plan = plan_cpu_precision(request("fp32"), probe_with(true, true));
  REQUIRE(plan.ok());
  CHECK(plan->dtype == Dtype::fp32);
  CHECK_FALSE(plan->autocast);
}

TEST_CASE("explicit bf16 without hardware: allowed, with a warning that it is emulated") {
  auto plan = plan_cpu_precision(request("bf16"), probe_with(false, false));
  REQUIRE(plan.ok());
  CHECK(plan->dtype == Dtype::bf16);
  CHECK(plan->autocast);
  CHECK(any_reason(plan.value(), "warning"));
  CHECK(any_reason(plan.value(), "emulated"));
}

TEST_CASE("fp16 is refused as not supported") {
  auto plan = plan_cpu_precision(request("fp16"), probe_with(true, true));
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == StatusCode::not_supported);
  CHECK(plan.status().message().find("fp16") != std::string::npos);
}

TEST_CASE("a negative thread count is invalid") {
  auto plan = plan_cpu_precision(request("auto", "auto", -1), probe_with(false, false));
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == StatusCode::invalid_argument);
}

TEST_CASE("TF32: on is refused, auto/off are off") {
  auto on = plan_cpu_precision(request("auto", "on"), probe_with(true, false));
  REQUIRE_FALSE(on.ok());
  CHECK(on.status().code() == StatusCode::not_supported);
  for (const char* v : {"auto", "off"}) {
    auto plan = plan_cpu_precision(request("auto", v), probe_with(true, false));
    REQUIRE(plan.ok());
    CHECK_FALSE(plan->tf32);
  }
}

TEST_CASE("threads: requested, else physical cores, else LibTorch's default") {
  auto requested = plan_cpu_precision(request("auto", "auto", 3), probe_with(false, false, 16));
  REQUIRE(requested.ok());
  CHECK(requested->threads == 3);

  auto physical = plan_cpu_precision(request("auto"), probe_with(false, false, 16));
  REQUIRE(physical.ok());
  CHECK(physical->threads == 16);  // not the 32 logical cores
  CHECK(any_reason(physical.value(), "physical core"));

  auto unknown = plan_cpu_precision(request("auto"), probe_with(false, false, 0));
  REQUIRE(unknown.ok());
  CHECK(unknown->threads == 0);

  auto negative = plan_cpu_precision(request("auto", "auto", -1), probe_with(false, false));
  CHECK(negative.status().code() == StatusCode::invalid_argument);
}
