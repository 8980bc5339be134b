// A brand-new device type from a plugin: the hostmem reference plugin registered by the host
// as LibTorch's PrivateUse1 device. LibTorch keeps one PrivateUse1 backend per process and
// the autograd engine counts devices at the first backward, so the cases that need a fresh
// process (checking mode, a backward before accelkit, a broken table) run this executable
// again with ACCELKIT_NEW_DEVICE_CHILD naming the case.
#include "torch_doctest.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "accelkit/bench.hpp"
#include "accelkit/new_device.hpp"
#include "accelkit/prefetch.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/sdk/torch_compat_new_device.hpp"
#include "test_support.hpp"

extern char** environ;

namespace new_device_suite {

using accelkit::DeviceUnavailableError;
using accelkit::Runtime;

const char* child_case() { return std::getenv("ACCELKIT_NEW_DEVICE_CHILD"); }
bool is_child(const char* name) { return child_case() && std::strcmp(child_case(), name) == 0; }

std::unique_ptr<Runtime> start(const std::string& device, std::vector<std::string> dirs = {ACCELKIT_TEST_PLUGIN_DIR},
                               bool scan = true) {
  accelkit::ContextOptions o;
  o.settings.env = std::map<std::string, std::string>{};
  o.settings.cli = {{"device", device}, {"plugin_scan", scan ? "true" : "false"}};
  o.loader.cli_paths = std::move(dirs);
  o.loader.read_environment = false;
  o.loader.include_default_dirs = false;
  return Runtime::start(o);
}

std::string variant_dir(const std::string& name) { return std::string(ACCELKIT_NEW_DEVICE_VARIANTS_DIR) + "/" + name; }

// This executable again, running only `test_case` as child case `name`; returns the wait status.
int run_child(const std::string& name, const std::string& test_case, const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "ACCELKIT_NEW_DEVICE_CHILD=", 26) != 0 && std::strncmp(*e, "ACCELKIT_HOSTMEM_CHECK=", 23) != 0)
      env_strings.emplace_back(*e);
  env_strings.push_back("ACCELKIT_NEW_DEVICE_CHILD=" + name);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--test-case=" + test_case, quiet = "--no-intro=true";
  std::vector<char*> argv{exe.data(), filter.data(), quiet.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) == 0);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

struct Mlp {
  torch::nn::Sequential net{torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 1)};
};

// 50 steps of Linear + ReLU + MSE + AdamW on `device` from the seed; the parameters, on the CPU.
std::vector<torch::Tensor> train_50(const c10::Device& device, std::uint64_t seed) {
  torch::manual_seed(seed);
  Mlp m;
  m.net->to(device);
  torch::optim::AdamW opt(m.net->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(1e-2));
  torch::manual_seed(seed + 1);
  const torch::Tensor x = torch::randn({64, 8}), y = torch::randn({64, 1});
  const torch::Tensor xd = x.to(device), yd = y.to(device);
  for (int i = 0; i < 50; ++i) {
    opt.zero_grad();
    torch::mse_loss(m.net->forward(xd), yd).backward();
    opt.step();
  }
  std::vector<torch::Tensor> out;
  for (const auto& p : m.net->parameters()) out.push_back(p.detach().to(torch::kCPU));
  return out;
}

// The device runtime for this process (the first case that needs it starts it).
Runtime& hostmem() {
  static std::unique_ptr<Runtime> rt = start("hostmem");
  return *rt;
}

TEST_CASE("hostmem is a device of its own: LibTorch's name for it, tensors, views sharing storage, module->to") {
  if (child_case()) return;
  const c10::Device dev = hostmem().device();
  CHECK(dev.type() == c10::DeviceType::PrivateUse1);
  CHECK(dev.str() == (accelkit::compat::kPrivateUse1HasName ? "hostmem:0" : "privateuseone:0"));
  const accelkit::new_device::State st = accelkit::new_device::state();
  CHECK(st.active);
  CHECK(st.plugin == "hostmem");
  CHECK((st.native_kernels == std::vector<std::string>{"mm", "addmm"}));

  const torch::Tensor host = torch::arange(12, torch::kFloat);
  torch::Tensor x = host.to(dev);
  CHECK(x.device() == dev);
  torch::Tensor v = x.view({3, 4}), t = v.t(), r = x.reshape({4, 3});
  CHECK(v.data_ptr() == x.data_ptr());
  CHECK(r.data_ptr() == x.data_ptr());
  CHECK_FALSE(t.is_contiguous());
  CHECK(torch::equal(t.to(torch::kCPU), host.view({3, 4}).t()));
  CHECK(torch::equal(t.contiguous().to(torch::kCPU), host.view({3, 4}).t().contiguous()));
  v.mul_(2);  // through the view: the base sees it
  CHECK(torch::equal(x.to(torch::kCPU), host * 2));
  x.narrow(0, 2, 3).fill_(-1);  // a strided region written from the host side of a copy
  CHECK(torch::equal(x.to(torch::kCPU).narrow(0, 2, 3), torch::full({3}, -1.0f)));

  // Synchronising the device's stream (the table's synchronize; hostmem is synchronous).
  CHECK_NOTHROW(c10::Stream(c10::Stream::DEFAULT, dev).synchronize());

  // An operator the fallback cannot run: a view (its result must share the device's memory).
  CHECK_THROWS_WITH(x.unfold(0, 2, 1), doctest::Contains("unfold is a view operator"));

  // Serialization reads the storage (set_) and copies it to the host.
  // LibTorch 1.13's reader restores CPU, CUDA and HPU tensors only.
  std::stringstream saved;
  torch::save(x, saved);
  torch::Tensor loaded;
  if (accelkit::compat::kPrivateUse1HasName) {
    torch::load(loaded, saved);
    CHECK(torch::equal(loaded.to(torch::kCPU), x.to(torch::kCPU)));
  } else {
    CHECK_THROWS_WITH(torch::load(loaded, saved), doctest::Contains("PRIVATEUSEONE"));
  }

  torch::nn::Linear lin(4, 3);
  const torch::Tensor w = lin->weight.detach().clone();
  lin->to(dev);
  CHECK(lin->weight.device() == dev);
  CHECK(torch::equal(lin->weight.detach().to(torch::kCPU), w));
  lin->to(torch::kCPU);
  CHECK(lin->weight.device().is_cpu());
  CHECK(torch::equal(lin->weight.detach(), w));
}

TEST_CASE("50 steps of Linear + ReLU + MSE + AdamW: parameters bit-equal to the same run on the CPU") {
  if (child_case() && !is_child("checking")) return;
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  const c10::Device dev = hostmem().device();
  accelkit::new_device::reset_fallback_counts();
  const auto on_device = train_50(dev, seed);
  const auto on_cpu = train_50(torch::kCPU, seed);
  REQUIRE(on_device.size() == on_cpu.size());
  for (std::size_t i = 0; i < on_cpu.size(); ++i) CHECK(torch::equal(on_device[i], on_cpu[i]));

  // The operators that ran on the CPU through the fallback, counted; the native ones are not there.
  const auto fallbacks = accelkit::new_device::fallback_counts();
  REQUIRE_FALSE(fallbacks.empty());
  std::string names;
  for (const auto& f : fallbacks) names += f.op + " ";
  INFO(names);
  CHECK(fallbacks.front().calls >= 50);
  for (const auto& f : fallbacks) {
    CHECK(f.op.rfind("aten::", 0) == 0);
    CHECK(f.op != "aten::mm");
    CHECK(f.op != "aten::addmm");
  }
}

// 10 steps of a small CNN (conv, transposed conv, pooling, BatchNorm, a Linear head) with
// cross-entropy and AdamW on `device` from the seed; the parameters, on the CPU.
std::vector<torch::Tensor> train_cnn(const c10::Device& device, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential net{torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)),
                            torch::nn::BatchNorm2d(8),
                            torch::nn::ReLU(),
                            torch::nn::MaxPool2d(2),
                            torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 3).groups(2).bias(false)),
                            torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(8, 4, 2).stride(2)),
                            torch::nn::Flatten(),
                            torch::nn::Linear(4 * 4 * 4, 5)};
  net->to(device);
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::manual_seed(seed + 1);
  const torch::Tensor x = torch::randn({4, 3, 8, 8}).to(device), y = torch::randint(0, 5, {4}).to(device);
  for (int i = 0; i < 10; ++i) {
    opt.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    opt.step();
  }
  std::vector<torch::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().to(torch::kCPU));
  return out;
}

TEST_CASE("a CNN trains on the device bit-equal to the CPU: convolutions run on CPU copies and are counted") {
  if (child_case()) return;
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  const c10::Device dev = hostmem().device();
  accelkit::new_device::reset_fallback_counts();
  const auto on_device = train_cnn(dev, seed);
  const auto on_cpu = train_cnn(torch::kCPU, seed);
  REQUIRE(on_device.size() == on_cpu.size());
  for (std::size_t i = 0; i < on_cpu.size(); ++i) CHECK(torch::equal(on_device[i], on_cpu[i]));
  std::map<std::string, std::uint64_t> calls;
  for (const auto& f : accelkit::new_device::fallback_counts()) calls[f.op] = f.calls;
  CHECK(calls["aten::convolution_overrideable"] == 30);  // 3 convolutions x 10 steps
  CHECK(calls["aten::convolution_backward_overrideable"] == 30);
}

// A Linear + ReLU + Linear forward and backward under bf16 autocast on `device`; the loss, the
// first layer's output dtype and the gradients, on the CPU.
struct AutocastRun {
  torch::Tensor loss;
  c10::ScalarType hidden_dtype;
  std::vector<torch::Tensor> grads;
};
AutocastRun autocast_step(const c10::Device& device, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Linear l1(16, 8), l2(8, 1);
  l1->to(device);
  l2->to(device);
  torch::manual_seed(seed + 1);
  const torch::Tensor x = torch::randn({32, 16}).to(device), y = torch::randn({32, 1}).to(device);
  AutocastRun r;
  {
    accelkit::compat::AutocastGuard autocast(device.type(), true, at::kBFloat16);
    const torch::Tensor h = l1->forward(x);
    r.hidden_dtype = h.scalar_type();
    torch::Tensor loss = torch::mse_loss(l2->forward(torch::relu(h)), y);
    loss.backward();
    r.loss = loss.detach().to(torch::kCPU);
  }
  for (const auto& p : {l1->weight, l1->bias, l2->weight, l2->bias}) r.grads.push_back(p.grad().to(torch::kCPU));
  return r;
}

TEST_CASE("bf16 autocast on the device: the CPU's autocast numerics bit for bit (LibTorch 2.4+), refused before") {
  if (child_case()) return;
  Runtime& rt = hostmem();
  accelkit::PrecisionRequest bf16;
  bf16.precision = accelkit::Dtype::bf16;
  auto precision = rt.device_handle()->precision();
  REQUIRE(precision.ok());
  const auto plan = precision.value()->plan(bf16);
  if (!accelkit::compat::kPrivateUse1HasAutocast) {
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.status().message().find("LibTorch 2.4") != std::string::npos);
    CHECK_FALSE(rt.device_handle()->info().capabilities.has(accelkit::Capability::bf16));
    return;
  }
  REQUIRE(plan.ok());
  CHECK(plan.value().autocast);
  CHECK((plan.value().dtype == accelkit::Dtype::bf16));
  CHECK(rt.device_handle()->info().capabilities.has(accelkit::Capability::bf16));

  // Applied, LibTorch reads it back; the runtime's own plan is applied again afterwards.
  REQUIRE(precision.value()->apply(plan.value()).ok());
  CHECK(accelkit::compat::autocast_enabled(c10::DeviceType::PrivateUse1));
  CHECK((accelkit::compat::autocast_dtype(c10::DeviceType::PrivateUse1) == at::kBFloat16));
  REQUIRE(precision.value()->apply(rt.precision()).ok());
  CHECK_FALSE(accelkit::compat::autocast_enabled(c10::DeviceType::PrivateUse1));

  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  const AutocastRun dev = autocast_step(rt.device(), seed), cpu = autocast_step(torch::kCPU, seed);
  CHECK((dev.hidden_dtype == at::kBFloat16));  // the Linear ran in bf16
  CHECK((cpu.hidden_dtype == at::kBFloat16));
  CHECK((dev.loss.scalar_type() == at::kFloat));  // mse_loss in fp32
  CHECK(torch::equal(dev.loss, cpu.loss));
  REQUIRE(dev.grads.size() == cpu.grads.size());
  for (std::size_t i = 0; i < cpu.grads.size(); ++i) CHECK(torch::equal(dev.grads[i], cpu.grads[i]));
}

TEST_CASE("the prefetcher delivers batches on the device, equal to what was produced") {
  if (child_case()) return;
  const c10::Device dev = hostmem().device();
  int produced = 0;
  accelkit::Prefetcher<torch::data::Example<>> batches(
      [&]() -> std::optional<torch::data::Example<>> {
        if (produced == 4) return std::nullopt;
        const int i = produced++;
        return torch::data::Example<>{torch::arange(6, torch::kFloat).view({2, 3}) + i, torch::full({2}, i)};
      },
      accelkit::PrefetchOptions{2, dev});
  int i = 0;
  while (auto b = batches.next()) {
    CHECK(b->data.device() == dev);
    CHECK(b->target.device() == dev);
    CHECK(torch::equal(b->data.to(torch::kCPU), torch::arange(6, torch::kFloat).view({2, 3}) + i));
    CHECK(torch::equal(b->target.to(torch::kCPU), torch::full({2}, i)));
    ++i;
  }
  CHECK(i == 4);
}

TEST_CASE("checking mode: training runs through the plugin's calls only, and a direct read of device memory faults") {
  if (is_child("checking-read")) {
    torch::Tensor x = torch::ones({16}).to(hostmem().device());
    volatile float v = *static_cast<const float*>(x.data_ptr());  // must fault
    (void)v;
    std::_Exit(0);
  }
  if (child_case()) return;
  // Training in checking mode (the arena is inaccessible outside copies and kernels).
  int status = run_child("checking", "50 steps*", {"ACCELKIT_HOSTMEM_CHECK=1"});
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  status = run_child("checking-read", "checking mode*", {"ACCELKIT_HOSTMEM_CHECK=1"});
  REQUIRE(WIFSIGNALED(status));
  CHECK((WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS));
  // Without checking mode the same read passes (which is what checking mode is for).
  status = run_child("checking-read", "checking mode*");
  CHECK(WIFEXITED(status));
}

TEST_CASE("starting accelkit after the program's first backward is refused with the order to fix") {
  if (is_child("after-backward")) {
    torch::Tensor a = torch::ones({2}, torch::requires_grad());
    (a * 3).sum().backward();
    try {
      start("hostmem");
    } catch (const DeviceUnavailableError& e) {
      const std::string what = e.what();
      std::_Exit(what.find("before the program runs any backward") != std::string::npos ? 0 : 3);
    }
    std::_Exit(4);
  }
  if (child_case()) return;
  const int status = run_child("after-backward", "starting accelkit after*");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a table without a required entry is refused, naming the entry; the host keeps its CPU") {
  if (is_child("nocopy")) {
    // At scan time (the scanner opens the device and checks its table) ...
    try {
      start("hostmem_nocopy", {ACCELKIT_TEST_PLUGIN_DIR, variant_dir("hostmem_nocopy")});
      std::_Exit(6);
    } catch (const DeviceUnavailableError& e) {
      const std::string what = e.what();
      if (what.find("examined in a separate process") == std::string::npos ||
          what.find("required entry copy") == std::string::npos)
        std::_Exit(7);
    }
    // ... and, with the scan off, when the host activates the device.
    try {
      start("hostmem_nocopy", {ACCELKIT_TEST_PLUGIN_DIR, variant_dir("hostmem_nocopy")}, /*scan=*/false);
    } catch (const DeviceUnavailableError& e) {
      const std::string what = e.what();
      if (what.find("hostmem_nocopy") == std::string::npos || what.find("required entry copy") == std::string::npos)
        std::_Exit(3);
      // The host runs on: the CPU still starts in this process.
      auto cpu = start("cpu", {ACCELKIT_TEST_PLUGIN_DIR, variant_dir("hostmem_nocopy")});
      std::_Exit(cpu->device().is_cpu() ? 0 : 5);
    }
    std::_Exit(4);
  }
  if (child_case()) return;
  const int status = run_child("nocopy", "a table without*");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a second new-device plugin is listed with the reason and refused when asked for") {
  if (child_case()) return;
  hostmem();  // hostmem is this process's new device type
  const std::vector<std::string> dirs{ACCELKIT_TEST_PLUGIN_DIR, variant_dir("hostmem2")};
  try {
    start("hostmem2", dirs);
    FAIL("a second new device type started");
  } catch (const DeviceUnavailableError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(accelkit::test::contains(what, "already runs hostmem's"));
  }
  // Asking for the active one again in the same process works.
  auto again = start("hostmem", dirs);
  CHECK(again->device() == hostmem().device());
}

TEST_CASE("bench on the device: the accuracy check passes and the fallbacks are reported") {
  if (child_case()) return;
  accelkit::BenchOptions o;
  o.model = "mlp";
  o.width = 64;
  o.batch = 16;
  o.steps = 2;
  o.warmup = 1;
  o.floors = false;
  const accelkit::BenchResult r = accelkit::run_bench(hostmem(), o);
  CHECK(r.device == "hostmem:0");
  CHECK(r.accuracy.ok);
  CHECK(r.accuracy.rel_diff == 0.0);  // the CPU's kernels on both sides
  CHECK_FALSE(r.fallbacks.empty());
}

}  // namespace new_device_suite
