// The CUDA architecture rules: features by compute capability, where the kernel's binaries
// run, precision plans (auto and explicit requests) and SDPA backend plans.
#include <doctest/doctest.h>

#include "arch_rules.hpp"

using namespace accelkit;
using namespace accelkit::cuda;

namespace {

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

}  // namespace

TEST_CASE("features by compute capability") {
  const auto h100 = arch_features({9, 0}, 2);
  CHECK(h100.fp16_tensor_cores);
  CHECK(h100.tf32);
  CHECK(h100.bf16);
  CHECK(h100.fp8);
  CHECK(h100.sdpa_flash);
  CHECK(h100.sdpa_mem_efficient);

  const auto ada = arch_features({8, 9}, 2);
  CHECK(ada.fp8);
  const auto a100 = arch_features({8, 0}, 2);
  CHECK(a100.bf16);
  CHECK(a100.tf32);
  CHECK_FALSE(a100.fp8);
  CHECK(a100.sdpa_flash);

  const auto v100 = arch_features({7, 0}, 2);
  CHECK(v100.fp16_tensor_cores);
  CHECK_FALSE(v100.tf32);
  CHECK_FALSE(v100.bf16);
  CHECK_FALSE(v100.sdpa_flash);
  CHECK(v100.sdpa_mem_efficient);

  const auto p100 = arch_features({6, 0}, 2);
  CHECK_FALSE(p100.fp16_tensor_cores);
  CHECK_FALSE(p100.bf16);

  const auto old_torch = arch_features({9, 0}, 1);
  CHECK(old_torch.bf16);
  CHECK_FALSE(old_torch.sdpa_flash);
  CHECK_FALSE(old_torch.sdpa_mem_efficient);
}

TEST_CASE("kernel binaries: SASS within a major, PTX upward") {
  const std::vector<int> archs{80, 90};
  CHECK(kernel_runs_on(archs, {8, 0}));
  CHECK(kernel_runs_on(archs, {8, 6}));  // sm_80 SASS runs on 8.6
  CHECK(kernel_runs_on(archs, {8, 9}));
  CHECK(kernel_runs_on(archs, {9, 0}));
  CHECK(kernel_runs_on(archs, {10, 0}));  // compute_90 PTX is JIT-compiled
  CHECK(kernel_runs_on(archs, {12, 0}));
  CHECK_FALSE(kernel_runs_on(archs, {7, 5}));
  CHECK_FALSE(kernel_runs_on(archs, {6, 0}));
  CHECK_FALSE(kernel_runs_on({90}, {8, 0}));
  CHECK_FALSE(kernel_runs_on({}, {9, 0}));
}

TEST_CASE("auto precision: bf16 + TF32 from 8.0, fp16 + loss scaling on 7.x, fp32 before") {
  auto h100 = plan_cuda_precision(request("auto"), {9, 0});
  REQUIRE(h100.ok());
  CHECK(h100->dtype == Dtype::bf16);
  CHECK(h100->autocast);
  CHECK(h100->tf32);
  CHECK_FALSE(h100->loss_scaling);

  auto a100 = plan_cuda_precision(request("auto"), {8, 0});
  REQUIRE(a100.ok());
  CHECK(a100->dtype == Dtype::bf16);
  CHECK(a100->tf32);

  auto v100 = plan_cuda_precision(request("auto"), {7, 0});
  REQUIRE(v100.ok());
  CHECK(v100->dtype == Dtype::fp16);
  CHECK(v100->autocast);
  CHECK(v100->loss_scaling);
  CHECK_FALSE(v100->tf32);

  auto t4 = plan_cuda_precision(request("auto"), {7, 5});
  REQUIRE(t4.ok());
  CHECK(t4->dtype == Dtype::fp16);

  auto p100 = plan_cuda_precision(request("auto"), {6, 0});
  REQUIRE(p100.ok());
  CHECK(p100->dtype == Dtype::fp32);
  CHECK_FALSE(p100->autocast);
  CHECK_FALSE(p100->loss_scaling);
  CHECK_FALSE(p100->tf32);
  CHECK_FALSE(p100->reasons.empty());
}

TEST_CASE("explicit requests: honoured or refused, never silently changed") {
  auto fp32 = plan_cuda_precision(request("fp32", "off"), {9, 0});
  REQUIRE(fp32.ok());
  CHECK(fp32->dtype == Dtype::fp32);
  CHECK_FALSE(fp32->autocast);
  CHECK_FALSE(fp32->tf32);

  auto fp16_h100 = plan_cuda_precision(request("fp16"), {9, 0});
  REQUIRE(fp16_h100.ok());
  CHECK(fp16_h100->dtype == Dtype::fp16);
  CHECK(fp16_h100->loss_scaling);
  CHECK(fp16_h100->tf32);

  auto bf16_v100 = plan_cuda_precision(request("bf16"), {7, 0});
  REQUIRE(bf16_v100.ok());
  CHECK(bf16_v100->dtype == Dtype::bf16);
  CHECK(bf16_v100->reasons[0].find("warning") == 0);

  auto tf32_v100 = plan_cuda_precision(request("auto", "on"), {7, 0});
  REQUIRE_FALSE(tf32_v100.ok());
  CHECK(tf32_v100.status().code() == StatusCode::not_supported);

  auto fp16_old = plan_cuda_precision(request("fp16"), {5, 2});
  REQUIRE_FALSE(fp16_old.ok());
  CHECK(fp16_old.status().code() == StatusCode::not_supported);

  CHECK(plan_cuda_precision(request("auto", "auto", -1), {9, 0}).status().code() == StatusCode::invalid_argument);
  auto threads = plan_cuda_precision(request("auto", "auto", 4), {9, 0});
  REQUIRE(threads.ok());
  CHECK(threads->threads == 4);
}

TEST_CASE("SDPA backends by setting") {
  const auto h100 = arch_features({9, 0}, 2);
  auto a = plan_sdpa("auto", h100, {9, 0});
  REQUIRE(a.ok());
  CHECK(a->flash);
  CHECK(a->mem_efficient);
  CHECK(a->math);

  auto flash = plan_sdpa("flash", h100, {9, 0});
  REQUIRE(flash.ok());
  CHECK(flash->flash);
  CHECK_FALSE(flash->mem_efficient);
  CHECK(flash->math);

  auto math = plan_sdpa("math", h100, {9, 0});
  REQUIRE(math.ok());
  CHECK_FALSE(math->flash);
  CHECK_FALSE(math->mem_efficient);

  const auto v100 = arch_features({7, 0}, 2);
  auto v = plan_sdpa("auto", v100, {7, 0});
  REQUIRE(v.ok());
  CHECK_FALSE(v->flash);
  CHECK(v->mem_efficient);
  CHECK(plan_sdpa("flash", v100, {7, 0}).status().code() == StatusCode::not_supported);
  CHECK(plan_sdpa("mem_efficient", arch_features({9, 0}, 1), {9, 0}).status().code() == StatusCode::not_supported);
  CHECK(plan_sdpa("fast", h100, {9, 0}).status().code() == StatusCode::invalid_argument);
}
