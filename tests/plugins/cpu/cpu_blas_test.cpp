// OpenBLAS kernel sets: the choice (plan_openblas_kernels, pure, fake states) and the live
// switch in this process, checked on fp32 matmuls against an fp64 reference. The live cases
// need a DYNAMIC_ARCH OpenBLAS behind LibTorch and skip, saying so, without one.
#include <ATen/ATen.h>

#include "torch_doctest.hpp"

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "openblas_kernels.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace cpu_blas_suite {

using namespace accelkit::cpu;
using accelkit::BlasKernels;

namespace {

IsaFlags isa(bool avx2, bool avx512) {
  IsaFlags f;
  f.avx2 = avx2;
  f.avx512f = f.avx512bw = avx512;
  return f;
}

OpenBlasState state(std::string library_choice) {
  OpenBlasState s;
  s.present = true;
  s.library_choice = library_choice;
  s.current = std::move(library_choice);
  s.kernel_sets = {"Prescott", "Core2", "Nehalem", "Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake"};
  return s;
}

// ||a - b|| / ||b|| of an fp32 matmul against the same product in fp64.
double matmul_error(int n) {
  at::Tensor a = at::randn({n, n + 3});
  at::Tensor b = at::randn({n + 3, n - 5});
  at::Tensor ref = at::mm(a.to(at::kDouble), b.to(at::kDouble));
  at::Tensor got = at::mm(a, b).to(at::kDouble);
  return ((got - ref).norm() / ref.norm()).item<double>();
}

bool live_openblas() {
  const OpenBlasState s = openblas_state();
  if (!s.present) std::cout << "skipped: " << s.absent_reason << '\n';
  return s.present;
}

}  // namespace

TEST_CASE("ranks follow the widest vector ISA a set uses") {
  CHECK(openblas_kernel_rank("Prescott") == 0);
  CHECK(openblas_kernel_rank("sandybridge") == 1);
  CHECK(openblas_kernel_rank("HASWELL") == 2);
  CHECK(openblas_kernel_rank("Zen") == 2);
  CHECK(openblas_kernel_rank("SkylakeX") == 3);
  CHECK(openblas_kernel_rank("Cooperlake") == 3);
  CHECK(openblas_kernel_rank("NoSuchCore") == 0);
}

TEST_CASE("the widest set the CPU runs, among those the library carries") {
  const std::vector<std::string> all = state("Prescott").kernel_sets;
  CHECK(best_openblas_kernels(isa(true, true), "Intel", all) == "SkylakeX");
  CHECK(best_openblas_kernels(isa(true, true), "AMD", all) == "SkylakeX");  // Zen 4
  CHECK(best_openblas_kernels(isa(true, false), "Intel", all) == "Haswell");
  CHECK(best_openblas_kernels(isa(true, false), "AMD", all) == "Zen");
  CHECK(best_openblas_kernels(isa(false, false), "Intel", all).empty());
  CHECK(best_openblas_kernels(isa(true, true), "Intel", {"Prescott", "Haswell"}) == "Haswell");
}

TEST_CASE("plan: replace a fallback narrower than the CPU, keep everything else, say why") {
  SUBCASE("Prescott on an AVX-512 CPU: SkylakeX") {
    const BlasKernelPlan p = plan_openblas_kernels(BlasKernels::automatic, state("Prescott"), isa(true, true), "Intel");
    CHECK(p.kernels == "SkylakeX");
    CHECK(p.reason.find("instead of Prescott") != std::string::npos);
  }
  SUBCASE("Prescott on an AVX2 CPU: Haswell") {
    CHECK(plan_openblas_kernels(BlasKernels::automatic, state("Prescott"), isa(true, false), "Intel").kernels == "Haswell");
  }
  SUBCASE("already the widest: kept") {
    const BlasKernelPlan p = plan_openblas_kernels(BlasKernels::automatic, state("SkylakeX"), isa(true, true), "Intel");
    CHECK(p.kernels.empty());
    CHECK(p.reason.find("OpenBLAS's own choice, SkylakeX") != std::string::npos);
    // Cooperlake ranks with SkylakeX: not "replaced" by an equal set.
    CHECK(plan_openblas_kernels(BlasKernels::automatic, state("Cooperlake"), isa(true, true), "Intel").kernels.empty());
  }
  SUBCASE("blas_kernels = library: kept") {
    const BlasKernelPlan p = plan_openblas_kernels(BlasKernels::library, state("Prescott"), isa(true, true), "Intel");
    CHECK(p.kernels.empty());
    CHECK(p.reason.find("blas_kernels = library") != std::string::npos);
  }
  SUBCASE("a user's OPENBLAS_CORETYPE: kept") {
    OpenBlasState s = state("Nehalem");
    s.env_coretype = "Nehalem";
    const BlasKernelPlan p = plan_openblas_kernels(BlasKernels::automatic, s, isa(true, true), "Intel");
    CHECK(p.kernels.empty());
    CHECK(p.reason.find("OPENBLAS_CORETYPE=Nehalem") != std::string::npos);
  }
  SUBCASE("no OpenBLAS: nothing chosen, the reason passed on") {
    OpenBlasState s;
    s.absent_reason = "no OpenBLAS here";
    const BlasKernelPlan p = plan_openblas_kernels(BlasKernels::automatic, s, isa(true, true), "Intel");
    CHECK(p.kernels.empty());
    CHECK(p.reason.find("no OpenBLAS here") != std::string::npos);
  }
}

TEST_CASE("live: switching kernel sets keeps fp32 matmul correct and goes back to the library's own") {
  if (!live_openblas()) return;
  const OpenBlasState s = openblas_state();
  INFO("OpenBLAS chose " << s.library_choice);
  at::manual_seed(7);
  const double before = matmul_error(301);
  CHECK(before < 1e-5);
  std::vector<std::string> tried;
  for (const char* name : {"Haswell", "SkylakeX", "Prescott"}) {
    const bool runs = std::string(name) != "SkylakeX" || __builtin_cpu_supports("avx512bw");
    if (!runs || std::find(s.kernel_sets.begin(), s.kernel_sets.end(), name) == s.kernel_sets.end()) continue;
    if (std::string(name) == "Haswell" && !__builtin_cpu_supports("avx2")) continue;
    CAPTURE(name);
    CHECK(select_openblas_kernels(name).empty());
    CHECK(openblas_current_kernels() == name);
    for (int n : {64, 301, 517}) {
      CAPTURE(n);
      CHECK(matmul_error(n) < 1e-5);
    }
    tried.push_back(name);
  }
  CHECK(select_openblas_kernels("").empty());
  CHECK(openblas_current_kernels() == s.library_choice);
  CHECK(matmul_error(301) < 1e-5);
  std::cout << "switched through " << tried.size() << " kernel sets and back to " << s.library_choice << '\n';
  CHECK(!tried.empty());
}

TEST_CASE("live: an unknown set is refused and nothing changes") {
  if (!live_openblas()) return;
  const std::string before = openblas_current_kernels();
  const std::string err = select_openblas_kernels("NoSuchCore");
  CHECK(err.find("no kernel set 'NoSuchCore'") != std::string::npos);
  CHECK(openblas_current_kernels() == before);
}

}  // namespace cpu_blas_suite
