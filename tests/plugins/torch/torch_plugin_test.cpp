// The torch plugin (the device-generic backend) on this CPU-only machine, through the PrivateUse1
// device: a first runtime opens the hostmem reference device, which registers it with LibTorch
// (as a vendor extension would); from then on runtimes start with the hostmem plugin disabled,
// so the device is served by the torch plugin alone, found through at::accelerator. Before the
// registration, and on LibTorch older than 2.6, the plugin offers nothing and says why.
// One process of its own: LibTorch keeps one PrivateUse1 backend per process.
#include "torch_doctest.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "accelkit/conformance.hpp"
#include "accelkit/context.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/step_capture.hpp"
#include "cli_process.hpp"
#include "accelkit/sdk/support/adamw_state.hpp"
#include "accelkit/sdk/support/aten_fused_adamw.hpp"
#include "accelkit/sdk/torch_compat_accelerator.hpp"
#include "test_support.hpp"

namespace torch_plugin_suite {

using accelkit::Runtime;

accelkit::ContextOptions options(const std::string& device, std::vector<std::string> disable) {
  accelkit::ContextOptions o;
  o.settings.env = std::map<std::string, std::string>{};
  o.settings.cli = {{"device", device}, {"plugin_scan", "false"}};
  o.loader.cli_paths = {ACCELKIT_TEST_PLUGIN_DIR};
  o.loader.read_environment = false;
  o.loader.include_default_dirs = false;
  o.loader.disable_globs = std::move(disable);
  return o;
}

// The torch plugin's record in a fresh discovery (no scan).
accelkit::PluginRecord torch_record() {
  accelkit::LoaderOptions o = options("", {}).loader;
  o.scan = false;
  for (const auto& r : accelkit::discover_plugins(o).plugins)
    if (r.name == "torch") return r;
  FAIL("the torch plugin was not found in " ACCELKIT_TEST_PLUGIN_DIR);
  return {};
}

// The PrivateUse1 device registered by opening hostmem once (the first call); its LibTorch name.
std::string register_private_device() {
  static const std::string name = [] {
    auto rt = Runtime::start(options("hostmem", {}));
    return rt->device().str();
  }();
  return name;
}

// 50 steps of Linear + ReLU + Linear, MSE, AdamW on `device` from `seed`; the parameters, on the CPU.
std::vector<torch::Tensor> train_50(const c10::Device& device, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential net(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 4));
  net->to(device);
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::manual_seed(seed + 1);
  const auto x = torch::randn({8, 16}).to(device), y = torch::randn({8, 4}).to(device);
  for (int i = 0; i < 50; ++i) {
    opt.zero_grad();
    torch::mse_loss(net->forward(x), y).backward();
    opt.step();
  }
  std::vector<torch::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().to(torch::kCPU));
  return out;
}

TEST_CASE("before an accelerator is registered the torch plugin offers nothing, and says why") {
  const auto r = torch_record();
  REQUIRE(r.probe);
  CHECK(r.probe->devices.empty());
  REQUIRE_FALSE(r.probe->reasons.empty());
  const std::string& why = r.probe->reasons.front();
  CAPTURE(why);
  if (accelkit::compat::accelerator_api())
    CHECK(why.find("reports no accelerator (at::accelerator::getAccelerator)") != std::string::npos);
  else
    CHECK(why.find("has no device-generic API (at::accelerator, from 2.6)") != std::string::npos);
}

TEST_CASE("the PrivateUse1 device, served by the torch plugin alone, trains 50 AdamW steps bit-equal to the CPU") {
  const std::string name = register_private_device();
  if (!accelkit::compat::accelerator_api()) {
    MESSAGE("skipped: LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR
                                 << " has no at::accelerator (2.6+): the torch plugin offers nothing here");
    CHECK_THROWS_AS(Runtime::start(options("torch", {"hostmem"})), accelkit::DeviceUnavailableError);
    return;
  }
  // Offered beside the vendor plugin's device of the same type: kind "other" and score 5, so any
  // vendor device that auto may take (a GPU, an NPU) ranks above it; here hostmem's is a
  // reference device, which auto never takes, and the generic one ranks above the CPU.
  {
    const auto ctx = accelkit::Context::create(options("auto", {}));
    const auto& c = ctx->decision().candidates;
    const auto at = [&](const std::string& id) {
      return std::find_if(c.begin(), c.end(), [&](const accelkit::Candidate& x) { return x.device.id == id; });
    };
    REQUIRE(at("torch:0") != c.end());
    REQUIRE(at("hostmem:0") != c.end());
    CHECK(at("torch:0")->device.kind == accelkit::DeviceKind::other);
    CHECK(at("torch:0")->score == 5);
    CHECK(at("hostmem:0")->device.kind == accelkit::DeviceKind::npu);
    CHECK_FALSE(at("hostmem:0")->eligible);
    CHECK(at("torch:0") < at("cpu:0"));
  }
  auto rt = Runtime::start(options("torch", {"hostmem"}));
  const auto& info = rt->device_handle()->info();
  CHECK(info.id == "torch:0");
  CHECK(rt->device().str() == name);  // LibTorch's own name for the registered backend
  CHECK(info.kind == accelkit::DeviceKind::other);
  bool served = false;
  for (const auto& [k, v] : info.properties) served |= k == "served by" && v.find("at::accelerator") != std::string::npos;
  CHECK(served);

  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  const auto on_device = train_50(rt->device(), seed);
  const auto on_cpu = train_50(torch::kCPU, seed);
  REQUIRE(on_device.size() == on_cpu.size());
  for (std::size_t i = 0; i < on_cpu.size(); ++i) CHECK(torch::equal(on_device[i], on_cpu[i]));

  // What LibTorch's generic API cannot give for this device is refused with its reason.
  const auto memory = rt->device_handle()->memory();
  CHECK_FALSE(memory.ok());
  CHECK(memory.status().message().find("LibTorch gives no memory figures for " + name) != std::string::npos);
  CHECK_FALSE(info.capabilities.has(accelkit::Capability::fused_adamw));  // no at::_fused_adamw_ kernel for it
  torch::nn::Linear lin(2, 2);
  lin->to(rt->device());
  const auto opt = rt->make_adamw(lin->parameters(), accelkit::AdamWConfig{});
  CHECK(opt.implementation == "torch::optim::AdamW");
  INFO(opt.why);
  CHECK(opt.why.find("has no at::_fused_adamw_ kernel for") != std::string::npos);
}

TEST_CASE("a device whose runtime fails is refused with LibTorch's own message, naming the plugin and the device") {
  const std::string name = register_private_device();
  if (!accelkit::compat::accelerator_api()) return;  // said in the case above
  const c10::Device device(name);
  // The device's memory taken (address space only: nothing is written), so that opening it fails
  // inside LibTorch as a broken runtime's would.
  std::vector<torch::Tensor> hog;
  const auto bytes_on_device = torch::TensorOptions().dtype(torch::kByte).device(device);
  for (std::int64_t bytes = std::int64_t{1} << 40; bytes >= 1; bytes /= 2)
    for (int tries = 0; tries < 4; ++tries) {
      try {
        hog.push_back(torch::empty({bytes}, bytes_on_device));
      } catch (const c10::Error&) {
        break;
      }
    }
  REQUIRE_FALSE(hog.empty());
  accelkit::PluginRecord rec = torch_record();
  REQUIRE(rec.plugin);
  REQUIRE(rec.probe);
  REQUIRE(rec.probe->devices.size() == 1);
  auto opened = rec.plugin->open(0);
  REQUIRE_FALSE(opened.ok());
  const std::string why = opened.status().message();
  CAPTURE(why);
  CHECK(opened.status().code() == accelkit::StatusCode::unavailable);
  CHECK(why.rfind("torch:0 (", 0) == 0);
  CHECK(why.find("LibTorch could not open it") != std::string::npos);
  CHECK(why.find("out of memory") != std::string::npos);  // LibTorch's message, as the runtime raised it
  hog.clear();
  CHECK(rec.plugin->open(0).ok());
}

// An at::_fused_adamw_ kernel for the PrivateUse1 device, as a vendor extension registers one:
// the device's memory is the host's (hostmem), so it runs LibTorch's CPU kernel on CPU views of
// the same memory. Boxed, so it registers on every LibTorch (the test runs where the CPU kernel
// exists).
void fused_adamw_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto host_view = [](const at::Tensor& t) {
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) return t;
    return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
  };
  for (auto& v : *stack) {
    if (v.isTensor()) {
      v = host_view(v.toTensor());
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> views;
      for (const auto& t : v.toTensorVector()) views.push_back(host_view(t));
      v = c10::IValue(views);
    }
  }
  op.callBoxed(stack);
}

TEST_CASE("where the device has an at::_fused_adamw_ kernel, the torch plugin offers it, timed against the unfused "
          "update, and it steps as torch::optim::AdamW does") {
  register_private_device();
  if (!accelkit::compat::accelerator_api() || !accelkit::compat::aten_fused_adamw_available(c10::DeviceType::CPU)) {
    MESSAGE("skipped: needs at::accelerator (2.6+) and LibTorch's CPU kernel of at::_fused_adamw_ (2.4+)");
    return;
  }
  CHECK_FALSE(accelkit::compat::aten_fused_adamw_registered(c10::DeviceType::PrivateUse1));
  torch::Library kernels(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  kernels.impl("_fused_adamw_", torch::CppFunction::makeFromBoxedFunction<&fused_adamw_on_host>());
  REQUIRE(accelkit::compat::aten_fused_adamw_registered(c10::DeviceType::PrivateUse1));

  auto rt = Runtime::start(options("torch", {"hostmem"}));
  CHECK(rt->device_handle()->info().capabilities.has(accelkit::Capability::fused_adamw));
  torch::nn::Linear lin(64, 64);
  lin->to(rt->device());
  const auto chosen = rt->make_adamw(lin->parameters(), accelkit::AdamWConfig{});
  INFO(chosen.why);
  REQUIRE(rt->adamw_choice());
  const auto& choice = *rt->adamw_choice();
  CHECK((choice.origin == "benchmark" || choice.origin == "cache"));
  std::vector<std::string> timed;
  for (const auto& [name, ms] : choice.median_ms) timed.push_back(name);
  CHECK(timed == std::vector<std::string>{"aten-fused", "unfused"});
  CHECK(chosen.why.find(choice.name) != std::string::npos);

  // The fused step against torch::optim::AdamW on the CPU, 50 steps on fresh random inputs.
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  auto optimizers = rt->device_handle()->optimizer();
  REQUIRE_MESSAGE(optimizers.ok(), optimizers.status().message());
  const auto run = [&](const c10::Device& device, bool fused) {
    torch::manual_seed(seed);
    torch::nn::Sequential net(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 4));
    net->to(device);
    accelkit::AdamWConfig c;
    c.lr = 1e-2;
    c.weight_decay = 0.05;
    c.implementation = "aten-fused";
    std::shared_ptr<torch::optim::Optimizer> opt;
    if (fused) opt = optimizers.value()->create_adamw(net->parameters(), c).value();
    else opt = std::make_shared<torch::optim::AdamW>(net->parameters(), accelkit::support::adamw_options(c));
    torch::manual_seed(seed + 1);
    const auto x = torch::randn({8, 16}).to(device), y = torch::randn({8, 4}).to(device);
    for (int i = 0; i < 50; ++i) {
      opt->zero_grad();
      torch::mse_loss(net->forward(x), y).backward();
      opt->step();
    }
    std::vector<torch::Tensor> out;
    for (const auto& p : net->parameters()) out.push_back(p.detach().to(torch::kCPU));
    return out;
  };
  const auto fused = run(rt->device(), true);
  const auto reference = run(torch::kCPU, false);
  REQUIRE(fused.size() == reference.size());
  for (std::size_t i = 0; i < fused.size(); ++i) {
    const double diff = (fused[i] - reference[i]).abs().max().item<double>();
    const double scale = reference[i].abs().max().item<double>();
    CHECK(diff <= 1e-6 * std::max(scale, 1.0));
  }
}

TEST_CASE("accelkit verify passes on the device served by the torch plugin") {
  register_private_device();
  if (!accelkit::compat::accelerator_api()) return;  // said in the case above
  const auto report = accelkit::conformance::check_runtime_device(options("torch", {"hostmem"}), "torch:0");
  std::string lines;
  for (const auto& r : report.results) lines += std::string(to_string(r.outcome)) + " " + r.capability + " " + r.name + ": " + r.detail + "\n";
  INFO(lines);
  CHECK(report.device.id == "torch:0");
  CHECK(report.failed() == 0);
  CHECK(report.count(accelkit::conformance::Outcome::pass) >= 3);
}

TEST_CASE("extension_devices = hostmem: registered at start and served by the torch plugin, through the API and the CLI") {
  using accelkit::test::run_cli;
  const std::string dir = ACCELKIT_TEST_PLUGIN_DIR;
  const accelkit::test::EnvOverrides ext{{"ACCELKIT_EXTENSION_DEVICES", std::string("hostmem")}};
  if (!accelkit::compat::accelerator_api()) {
    const auto r = run_cli({"--plugin-path", dir, "verify", "--quick", "--device", "torch"}, ext);
    CHECK(r.code == 3);
    CHECK(r.err.find("has no device-generic API") != std::string::npos);
    return;
  }
  auto o = options("torch", {});
  o.settings.cli.emplace_back("extension_devices", "hostmem");
  auto rt = Runtime::start(o);
  CHECK(rt->device_handle()->info().id == "torch:0");
  const auto* hostmem = rt->context().plugin("hostmem");
  REQUIRE(hostmem);
  CHECK(hostmem->status == accelkit::PluginStatus::unavailable);
  CHECK(hostmem->reason.find("registered with LibTorch as an extension (extension_devices)") != std::string::npos);

  // The CLI: verify passes on the device the torch plugin serves and says so; info names the
  // plugin serving each device type.
  const auto verify = run_cli({"--plugin-path", dir, "verify", "--quick", "--device", "torch"}, ext);
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  CHECK(verify.out.find("torch:0 hostmem device 0 (LibTorch's device-generic API): ") != std::string::npos);
  CHECK(verify.out.find(" 0 failed") != std::string::npos);
  CHECK(verify.out.find("served by: the torch plugin") != std::string::npos);
  const auto info = run_cli({"--plugin-path", dir, "info", "--device", "torch"}, ext);
  INFO(info.out);
  CHECK(info.code == 0);
  CHECK(info.out.find("Selected: torch:0") != std::string::npos);
  CHECK(info.out.find("hostmem  torch alone (device-generic") != std::string::npos);

  // Bad input: a plugin that is not there, or declares no new device type, stops with the setting named.
  const auto missing = run_cli({"--plugin-path", dir, "info"}, {{"ACCELKIT_EXTENSION_DEVICES", std::string("nosuch")}});
  CHECK(missing.code == 2);  // a setting's value is wrong
  CHECK(missing.err.find("extension_devices (from ACCELKIT_EXTENSION_DEVICES): plugin 'nosuch' was not found") !=
        std::string::npos);
  const auto cpu = run_cli({"--plugin-path", dir, "info"}, {{"ACCELKIT_EXTENSION_DEVICES", std::string("cpu")}});
  CHECK(cpu.code == 2);
  CHECK(cpu.err.find("plugin 'cpu' declares no new device type") != std::string::npos);
}

// A test graph implementation for the PrivateUse1 device, registered at run time: it records
// which calls came, and like a real device's capture it runs nothing while capturing; a replay
// runs what was "recorded" - the step body the test gives it.
struct TestGraph {
  static inline int begins = 0, ends = 0, instantiates = 0, replays = 0;
  static inline bool capturing = false, fail_capture = false;
  static inline std::function<void()> body;
  static void reset_counts() { begins = ends = instantiates = replays = 0; }
};

bool register_test_graph() {
  static const bool registered = accelkit::compat::register_graph_functions(c10::DeviceType::PrivateUse1, [] {
    accelkit::compat::GraphFunctions f;
    f.capture_begin = [] { ++TestGraph::begins; TestGraph::capturing = true; };
    f.capture_end = [] {
      ++TestGraph::ends;
      TestGraph::capturing = false;
      TORCH_CHECK(!TestGraph::fail_capture, "test graph: capture refused");
    };
    f.instantiate = [] { ++TestGraph::instantiates; };
    f.replay = [] { ++TestGraph::replays; TestGraph::body(); };
    f.reset = [] { TestGraph::capturing = false; };
    return f;
  });
  return registered;
}

// 30 SGD steps (momentum, weight decay) of a small MLP on `device` from `seed`, through
// `capture` (a StepCapture of the runtime, or null: eager); the parameters, on the CPU.
std::vector<torch::Tensor> train_sgd(Runtime* rt, const c10::Device& device, std::uint64_t seed, std::string* mode) {
  torch::manual_seed(seed);
  torch::nn::Sequential net(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 4));
  net->to(device);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
  torch::manual_seed(seed + 1);
  const auto x = torch::randn({8, 16}).to(device), y = torch::randn({8, 4}).to(device);
  auto body = [&] {
    opt.zero_grad();
    torch::mse_loss(net->forward(x), y).backward();
    opt.step();
  };
  if (rt) {
    TestGraph::body = body;
    auto step = rt->capture_step(opt, [&] {
      if (!TestGraph::capturing) body();  // a capture records, it does not run
    });
    for (int i = 0; i < 30; ++i) step->run();
    *mode = step->mode_reason();
    TestGraph::body = nullptr;
  } else {
    for (int i = 0; i < 30; ++i) body();
  }
  std::vector<torch::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().to(torch::kCPU));
  return out;
}

TEST_CASE("capture_step through at::accelerator::Graph: captured once, replayed, the parameters equal eager's") {
  register_private_device();
  if (!accelkit::compat::accelerator_graph_api()) {
    MESSAGE("skipped: LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR
                                 << " has no device-generic graph interface (2.12+)");
    CHECK_FALSE(register_test_graph());
    return;
  }
  REQUIRE(register_test_graph());
  auto rt = Runtime::start(options("torch", {"hostmem"}));
  CHECK(rt->device_handle()->info().capabilities.has(accelkit::Capability::graph_capture));
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);

  TestGraph::reset_counts();
  std::string mode;
  const auto captured = train_sgd(rt.get(), rt->device(), seed, &mode);
  INFO(mode);
  CHECK(TestGraph::begins == 1);
  CHECK(TestGraph::ends == 1);
  CHECK(TestGraph::instantiates == 1);
  CHECK(TestGraph::replays == 30 - 3);  // 3 warm-up steps, then the capturing call replays too
  const auto eager = train_sgd(nullptr, rt->device(), seed, nullptr);
  for (std::size_t i = 0; i < eager.size(); ++i) CHECK(torch::equal(captured[i], eager[i]));

  // A capture the device refuses: the step runs eagerly from then on, with the reason; none is
  // lost or applied twice.
  TestGraph::reset_counts();
  TestGraph::fail_capture = true;
  const auto fell_back = train_sgd(rt.get(), rt->device(), seed, &mode);
  TestGraph::fail_capture = false;
  CHECK(mode.find("graph capture failed, running eagerly: test graph: capture refused") != std::string::npos);
  CHECK(TestGraph::replays == 0);
  for (std::size_t i = 0; i < eager.size(); ++i) CHECK(torch::equal(fell_back[i], eager[i]));

  // AdamW counts its steps on the host: refused with the reason, eager.
  torch::nn::Linear lin(4, 4);
  lin->to(rt->device());
  torch::optim::AdamW adamw(lin->parameters());
  auto step = rt->capture_step(adamw, [] {});
  step->run();
  CHECK(step->mode_reason().find("counts its steps on the host") != std::string::npos);
}

}  // namespace torch_plugin_suite
