// Negotiation: negotiate() on hand-built plugin records (a pure function) and on the fake
// plugins loaded from tests/fixtures/plugins; Context at the end, where an unavailable
// explicit request becomes DeviceUnavailableError (the CLI's exit 3).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "accelkit/context.hpp"
#include "accelkit/negotiation.hpp"
#include "fixture_paths.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace negotiation_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

DeviceInfo device(const std::string& plugin, std::size_t index, DeviceKind kind,
                  std::vector<std::string> caps = {"fp32"}, std::string torch_device = "meta") {
  DeviceInfo d;
  d.id = plugin + ":" + std::to_string(index);
  d.name = "Test " + plugin + " " + std::to_string(index);
  d.torch_device = std::move(torch_device);
  d.kind = kind;
  for (const auto& c : caps) {
    if (auto typed = capability_from_string(c)) d.capabilities.add(*typed);
    else d.capabilities.set(c, "1");
  }
  return d;
}

PluginRecord record(const std::string& name, int score, std::vector<DeviceInfo> devices,
                    PluginStatus status = PluginStatus::usable, std::string reason = "") {
  PluginRecord r;
  r.name = name;
  r.path = "/fixture/libaccelkit-" + name + ".so";
  r.status = status;
  r.reason = std::move(reason);
  ProbeReport p;
  p.score = score;
  p.devices = std::move(devices);
  r.probe = std::move(p);
  return r;
}

PluginRecord rejected(const std::string& name, std::string reason) {
  PluginRecord r;
  r.name = name;
  r.path = "/fixture/libaccelkit-" + name + ".so";
  r.status = PluginStatus::rejected;
  r.reason = std::move(reason);
  return r;
}

// A machine with everything, listed in the worst order.
std::vector<PluginRecord> full_machine() {
  return {
      record("cpu", 10, {device("cpu", 0, DeviceKind::cpu, {"fp32", "bf16"})}),
      record("mps", 30, {device("mps", 0, DeviceKind::integrated_gpu, {"fp32", "fp16"})}),
      record("rocm", 40, {device("rocm", 0, DeviceKind::discrete_gpu, {"fp32", "bf16", "fp16"})}),
      record("cuda", 50,
             {device("cuda", 0, DeviceKind::discrete_gpu, {"fp32", "tf32", "fp16", "fused_adamw"}),
              device("cuda", 1, DeviceKind::discrete_gpu, {"fp32", "tf32", "fp16", "fused_adamw"})}),
  };
}

std::vector<PluginRecord> without(std::vector<PluginRecord> plugins, const std::string& name) {
  plugins.erase(std::remove_if(plugins.begin(), plugins.end(), [&](const PluginRecord& r) { return r.name == name; }),
                plugins.end());
  return plugins;
}

DeviceRequest ask(std::string device) {
  DeviceRequest r;
  r.device = DeviceSelector::parse(device).value();
  if (!r.device.automatic()) r.device_origin = "--device";
  return r;
}

std::string selected_id(const Decision& d) { return d.selected ? d.selected->device.id : std::string("<none>"); }

const Candidate* candidate(const Decision& d, const std::string& id) {
  for (const auto& c : d.candidates)
    if (c.device.id == id) return &c;
  return nullptr;
}

std::string explain(const Decision& d) {
  std::string s = "selected " + selected_id(d) + "\nerror: " + d.error + "\ncandidates:";
  for (const auto& c : d.candidates)
    s += "\n  " + c.device.id + (c.eligible ? " [eligible] " : " [not eligible] ") + c.reason;
  s += "\nreasons:\n  " + join(d.reasons, "\n  ") + "\nhints:\n  " + join(d.hints, "\n  ");
  return s;
}

}  // namespace

TEST_CASE("kind_rank: discrete GPU > integrated GPU > NPU > other > CPU") {
  CHECK(kind_rank(DeviceKind::discrete_gpu) < kind_rank(DeviceKind::integrated_gpu));
  CHECK(kind_rank(DeviceKind::integrated_gpu) < kind_rank(DeviceKind::npu));
  CHECK(kind_rank(DeviceKind::npu) < kind_rank(DeviceKind::other));
  CHECK(kind_rank(DeviceKind::other) < kind_rank(DeviceKind::cpu));
}

TEST_CASE("auto: the declared kind decides first, then the score") {
  auto plugins = full_machine();
  Decision d = negotiate(plugins, DeviceRequest{});
  INFO(explain(d));
  REQUIRE(d.ok);
  CHECK_FALSE(d.explicit_request);
  CHECK(d.error.empty());
  CHECK(selected_id(d) == "cuda:0");
  CHECK_FALSE(d.selected->reason.empty());
  // Every device of every plugin is a candidate, best first, each with a reason.
  std::vector<std::string> order;
  for (const auto& c : d.candidates) order.push_back(c.device.id);
  CHECK(order == std::vector<std::string>{"cuda:0", "cuda:1", "rocm:0", "mps:0", "cpu:0"});
  for (const auto& c : d.candidates) {
    CHECK(c.eligible);
    CHECK_FALSE(c.reason.empty());
  }
  CHECK(d.hints.empty());

  plugins = without(plugins, "cuda");
  CHECK(selected_id(negotiate(plugins, DeviceRequest{})) == "rocm:0");
  plugins = without(plugins, "rocm");
  CHECK(selected_id(negotiate(plugins, DeviceRequest{})) == "mps:0");
  plugins = without(plugins, "mps");
  CHECK(selected_id(negotiate(plugins, DeviceRequest{})) == "cpu:0");
  plugins = without(plugins, "cpu");
  Decision none = negotiate(plugins, DeviceRequest{});
  CHECK_FALSE(none.ok);
  CHECK_FALSE(none.selected);
  CHECK_FALSE(none.error.empty());
}

TEST_CASE("auto: a vendor plugin's device outranks the device-generic backend's view of the same GPU") {
  // An Intel GPU as the xpu plugin reports it (discrete GPU, score 100) and as the device-generic
  // torch plugin does (kind other, score 5), both naming LibTorch's xpu:0.
  std::vector<PluginRecord> plugins = {
      record("torch", 5, {device("torch", 0, DeviceKind::other, {"fp32", "bf16"}, "xpu:0")}),
      record("xpu", 100, {device("xpu", 0, DeviceKind::discrete_gpu, {"fp32", "bf16", "fp16"}, "xpu:0")}),
      record("cpu", 10, {device("cpu", 0, DeviceKind::cpu, {"fp32"}, "cpu")}),
  };
  Decision d = negotiate(plugins, DeviceRequest{});
  INFO(explain(d));
  CHECK(selected_id(d) == "xpu:0");
  std::vector<std::string> order;
  for (const auto& c : d.candidates) order.push_back(c.device.id);
  CHECK(order == std::vector<std::string>{"xpu:0", "torch:0", "cpu:0"});
  // Without the vendor plugin (not installed, or disabled), the generic backend serves the GPU.
  CHECK(selected_id(negotiate(without(plugins, "xpu"), DeviceRequest{})) == "torch:0");
}

TEST_CASE("a data-parallel rank's LOCAL_RANK picks among the chosen plugin's devices") {
  auto plugins = full_machine();  // cuda:0, cuda:1, ...
  for (int local = 0; local < 4; ++local) {
    DeviceRequest r;
    r.local_rank = local;
    Decision d = negotiate(plugins, r);
    REQUIRE(d.ok);
    CAPTURE(local);
    CHECK(selected_id(d) == (local % 2 == 0 ? "cuda:0" : "cuda:1"));
    CHECK(d.selected->reason.find("LOCAL_RANK=" + std::to_string(local)) != std::string::npos);
  }
  // An explicit index wins; a single device has nothing to choose between.
  DeviceRequest explicit_one;
  explicit_one.device = *DeviceSelector::parse("cuda:0");
  explicit_one.local_rank = 1;
  CHECK(selected_id(negotiate(plugins, explicit_one)) == "cuda:0");
  DeviceRequest cpu;
  cpu.no_gpu = true;
  cpu.local_rank = 1;
  Decision c = negotiate(plugins, cpu);
  CHECK(selected_id(c) == "cpu:0");
  CHECK(c.selected->reason.find("LOCAL_RANK") == std::string::npos);
}

TEST_CASE("auto: no plugin name is special - a new backend ranks as the kind it declares") {
  auto plugins = full_machine();
  SUBCASE("a discrete GPU from an unknown plugin outranks cuda on score") {
    plugins.push_back(record("newgpu", 99, {device("newgpu", 0, DeviceKind::discrete_gpu)}));
    Decision d = negotiate(plugins, DeviceRequest{});
    INFO(explain(d));
    CHECK(selected_id(d) == "newgpu:0");
    CHECK(contains(d.selected->reason, "discrete GPU"));
    const Candidate* cuda = candidate(d, "cuda:0");
    REQUIRE(cuda);
    CHECK(contains(cuda->reason, "lower score"));
  }
  SUBCASE("an NPU ranks after every GPU and before the CPU, whatever its score") {
    plugins.push_back(record("npu", 99, {device("npu", 0, DeviceKind::npu)}));
    CHECK(selected_id(negotiate(without(without(plugins, "cuda"), "rocm"), DeviceRequest{})) == "mps:0");
    Decision d = negotiate(without(without(without(plugins, "cuda"), "rocm"), "mps"), DeviceRequest{});
    INFO(explain(d));
    CHECK(selected_id(d) == "npu:0");
    const Candidate* cpu = candidate(d, "cpu:0");
    REQUIRE(cpu);
    CHECK(contains(cpu->reason, "a CPU ranks below an NPU"));
  }
  SUBCASE("a plugin called 'cuda' that declares a CPU ranks as a CPU") {
    Decision d = negotiate({record("cuda", 99, {device("cuda", 0, DeviceKind::cpu)}),
                            record("other", 1, {device("other", 0, DeviceKind::integrated_gpu)})},
                           DeviceRequest{});
    INFO(explain(d));
    CHECK(selected_id(d) == "other:0");
  }
}

TEST_CASE("auto: discrete over integrated, then score") {
  SUBCASE("one plugin with an APU and a card: the card, even listed second") {
    Decision d = negotiate({record("rocm", 40, {device("rocm", 0, DeviceKind::integrated_gpu),
                                                device("rocm", 1, DeviceKind::discrete_gpu)})},
                           DeviceRequest{});
    INFO(explain(d));
    CHECK(selected_id(d) == "rocm:1");
  }
  SUBCASE("discrete beats a higher-scoring integrated") {
    Decision d = negotiate({record("npu", 90, {device("npu", 0, DeviceKind::integrated_gpu)}),
                            record("xpu", 10, {device("xpu", 0, DeviceKind::discrete_gpu)})},
                           DeviceRequest{});
    INFO(explain(d));
    CHECK(selected_id(d) == "xpu:0");
  }
  SUBCASE("same kind: the higher score") {
    Decision d = negotiate({record("npu", 20, {device("npu", 0, DeviceKind::discrete_gpu)}),
                            record("xpu", 80, {device("xpu", 0, DeviceKind::discrete_gpu)})},
                           DeviceRequest{});
    INFO(explain(d));
    CHECK(selected_id(d) == "xpu:0");
    const Candidate* loser = candidate(d, "npu:0");
    REQUIRE(loser);
    CHECK(loser->eligible);
    CHECK_FALSE(loser->reason.empty());
  }
}

TEST_CASE("devices that cannot be used are candidates with a reason, never chosen") {
  auto plugins = full_machine();
  plugins.push_back(record("rocm2", 45, {device("rocm2", 0, DeviceKind::discrete_gpu, {"fp32"}, /*torch_device=*/"")}));
  plugins.push_back(rejected("broken", "handshake: ABI major found 2, expected 1"));
  plugins.push_back(record("tpu", 0, {device("tpu", 0, DeviceKind::discrete_gpu)}, PluginStatus::unavailable,
                           "no driver"));
  Decision d = negotiate(without(plugins, "cuda"), DeviceRequest{});
  INFO(explain(d));
  CHECK(selected_id(d) == "rocm:0");
  const Candidate* listed = candidate(d, "rocm2:0");
  REQUIRE(listed);
  CHECK_FALSE(listed->eligible);
  CHECK_FALSE(listed->reason.empty());
  const Candidate* tpu = candidate(d, "tpu:0");
  REQUIRE(tpu);
  CHECK_FALSE(tpu->eligible);
  CHECK(contains(tpu->reason, "no driver"));
  // A plugin without a probe offers no device: one reason line for it.
  CHECK(any_contains(d.reasons, "broken"));
  CHECK(any_contains(d.reasons, "ABI major found 2"));
}

TEST_CASE("an explicit request is honoured or fails loudly") {
  auto plugins = full_machine();

  SUBCASE("a device by index") {
    Decision d = negotiate(plugins, ask("cuda:1"));
    INFO(explain(d));
    REQUIRE(d.ok);
    CHECK(d.explicit_request);
    CHECK(selected_id(d) == "cuda:1");
    CHECK_FALSE(d.selected->reason.empty());
  }
  SUBCASE("a plugin by name, below the auto winner") {
    Decision d = negotiate(plugins, ask("mps"));
    INFO(explain(d));
    REQUIRE(d.ok);
    CHECK(d.explicit_request);
    CHECK(selected_id(d) == "mps:0");
    const Candidate* c = candidate(d, "cuda:0");
    REQUIRE(c);
    CHECK_FALSE(c->eligible);
    CHECK_FALSE(c->reason.empty());
  }
  SUBCASE("an index that does not exist") {
    Decision d = negotiate(plugins, ask("cuda:5"));
    INFO(explain(d));
    CHECK_FALSE(d.ok);
    CHECK(d.explicit_request);
    CHECK_FALSE(d.selected);  // never a silent fallback
    CHECK(contains(d.error, "cuda:5"));
    CHECK(contains(d.error, "--device"));  // where the request came from
    for (std::string id : {"cuda:0", "cuda:1", "rocm:0", "mps:0", "cpu:0"}) {
      INFO(id);
      CHECK(contains(d.error, id));  // what is available
    }
  }
  SUBCASE("a plugin that is not there") {
    Decision d = negotiate(without(plugins, "rocm"), ask("rocm"));
    INFO(explain(d));
    CHECK_FALSE(d.ok);
    CHECK(d.explicit_request);
    CHECK_FALSE(d.selected);
    CHECK(contains(d.error, "rocm"));
    CHECK(contains(d.error, "cuda:0"));
    CHECK(contains(d.error, "cpu:0"));
  }
  SUBCASE("a plugin that is there but unavailable says why") {
    auto p = without(plugins, "rocm");
    p.push_back(record("rocm", 0, {device("rocm", 0, DeviceKind::discrete_gpu)}, PluginStatus::unavailable,
                       "no amdgpu driver loaded"));
    Decision d = negotiate(p, ask("rocm:0"));
    INFO(explain(d));
    CHECK_FALSE(d.ok);
    CHECK_FALSE(d.selected);
    CHECK(contains(d.error, "no amdgpu driver loaded"));
  }
  SUBCASE("a plugin that was rejected says why") {
    auto p = without(plugins, "rocm");
    p.push_back(rejected("rocm", "handshake: LibTorch found 2.5.0, expected 1.13.x"));
    Decision d = negotiate(p, ask("rocm"));
    INFO(explain(d));
    CHECK_FALSE(d.ok);
    CHECK(contains(d.error, "LibTorch found 2.5.0"));
  }
}

TEST_CASE("--no-gpu") {
  DeviceRequest r;
  r.no_gpu = true;
  Decision d = negotiate(full_machine(), r);
  INFO(explain(d));
  REQUIRE(d.ok);
  CHECK(d.explicit_request);
  CHECK(selected_id(d) == "cpu:0");
  for (const auto& c : d.candidates)
    if (c.device.kind != DeviceKind::cpu) {
      CHECK_FALSE(c.eligible);
      CHECK(icontains(c.reason, "no-gpu"));
    }

  Decision none = negotiate(without(full_machine(), "cpu"), r);
  INFO(explain(none));
  CHECK_FALSE(none.ok);
  CHECK(none.explicit_request);
  CHECK_FALSE(none.selected);
  CHECK(icontains(none.error, "no-gpu"));
}

TEST_CASE("prefer reorders the eligible devices") {
  auto plugins = full_machine();
  DeviceRequest r;
  r.prefer = {"rocm"};
  CHECK(selected_id(negotiate(plugins, r)) == "rocm:0");
  r.prefer = {"mps", "rocm"};
  CHECK(selected_id(negotiate(plugins, r)) == "mps:0");
  r.prefer = {"absent", "cpu"};
  CHECK(selected_id(negotiate(plugins, r)) == "cpu:0");
  r.prefer = {"absent"};
  CHECK(selected_id(negotiate(plugins, r)) == "cuda:0");

  SUBCASE("a preferred plugin that is unavailable is passed over") {
    auto p = without(plugins, "rocm");
    p.push_back(record("rocm", 0, {device("rocm", 0, DeviceKind::discrete_gpu)}, PluginStatus::unavailable, "no driver"));
    DeviceRequest q;
    q.prefer = {"rocm", "mps"};
    Decision d = negotiate(p, q);
    INFO(explain(d));
    CHECK(d.ok);
    CHECK(selected_id(d) == "mps:0");
  }
  SUBCASE("prefer does not override an explicit device") {
    DeviceRequest q = ask("cuda");
    q.prefer = {"rocm"};
    CHECK(selected_id(negotiate(plugins, q)) == "cuda:0");
  }
  SUBCASE("the chosen device's reason says it was preferred") {
    DeviceRequest q;
    q.prefer = {"rocm"};
    Decision d = negotiate(plugins, q);
    CHECK(icontains(d.selected->reason, "prefer"));
  }
}

TEST_CASE("require filters candidates, one reason each") {
  auto plugins = full_machine();

  SUBCASE("bf16: cuda here lacks it, rocm has it") {
    DeviceRequest r;
    r.require = {"bf16"};
    Decision d = negotiate(plugins, r);
    INFO(explain(d));
    REQUIRE(d.ok);
    CHECK(selected_id(d) == "rocm:0");
    for (std::string id : {"cuda:0", "cuda:1", "mps:0"}) {
      const Candidate* c = candidate(d, id);
      REQUIRE(c);
      CHECK_FALSE(c->eligible);
      CHECK(contains(c->reason, "bf16"));
    }
    CHECK(candidate(d, "cpu:0")->eligible);
  }
  SUBCASE("two capabilities, all must be there") {
    DeviceRequest r;
    r.require = {"fp16", "fused_adamw"};
    Decision d = negotiate(plugins, r);
    INFO(explain(d));
    CHECK(selected_id(d) == "cuda:0");
    const Candidate* rocm = candidate(d, "rocm:0");
    REQUIRE(rocm);
    CHECK_FALSE(rocm->eligible);
    CHECK(contains(rocm->reason, "fused_adamw"));
  }
  SUBCASE("a free key counts when set") {
    auto p = plugins;
    p.push_back(record("npu", 5, {device("npu", 0, DeviceKind::discrete_gpu, {"fp32", "int8_matmul"})}));
    DeviceRequest r;
    r.require = {"int8_matmul"};
    CHECK(selected_id(negotiate(p, r)) == "npu:0");
  }
  SUBCASE("nobody has it: fail, naming the capability") {
    DeviceRequest r;
    r.require = {"fp8"};
    Decision d = negotiate(plugins, r);
    INFO(explain(d));
    CHECK_FALSE(d.ok);
    CHECK_FALSE(d.selected);
    CHECK(contains(d.error, "fp8"));
    for (const auto& c : d.candidates) CHECK(contains(c.reason, "fp8"));
  }
  SUBCASE("with an explicit device that lacks it") {
    DeviceRequest r = ask("cuda:0");
    r.require = {"bf16"};
    Decision d = negotiate(plugins, r);
    INFO(explain(d));
    CHECK_FALSE(d.ok);
    CHECK(d.explicit_request);
    CHECK(contains(d.error, "bf16"));
  }
}

TEST_CASE("hints for GPUs on the PCI bus that no usable plugin covers") {
  const PciGpu nvidia{"0000:01:00.0", 0x10de, 0x2330, 0x030200};
  const PciGpu amd{"0000:c1:00.0", 0x1002, 0x744c, 0x030000};

  SUBCASE("NVIDIA card, no cuda plugin") {
    Decision d = negotiate(without(full_machine(), "cuda"), DeviceRequest{}, {nvidia});
    INFO(explain(d));
    REQUIRE(d.hints.size() == 1);
    CHECK(contains(d.hints[0], "cuda"));
    CHECK(contains(d.hints[0], nvidia.address));
    CHECK(selected_id(d) == "rocm:0");  // a hint changes nothing else
  }
  SUBCASE("NVIDIA card, cuda plugin unavailable: the hint carries its reason") {
    auto p = without(full_machine(), "cuda");
    p.push_back(record("cuda", 0, {}, PluginStatus::unavailable, "LibTorch here has no CUDA"));
    Decision d = negotiate(p, DeviceRequest{}, {nvidia});
    INFO(explain(d));
    REQUIRE(d.hints.size() == 1);
    CHECK(contains(d.hints[0], "LibTorch here has no CUDA"));
  }
  SUBCASE("AMD card, no rocm plugin; NVIDIA card covered") {
    Decision d = negotiate(without(full_machine(), "rocm"), DeviceRequest{}, {nvidia, amd});
    INFO(explain(d));
    REQUIRE(d.hints.size() == 1);
    CHECK(contains(d.hints[0], "rocm"));
    CHECK(contains(d.hints[0], amd.address));
  }
  SUBCASE("everything covered: no hint") {
    Decision d = negotiate(full_machine(), DeviceRequest{}, {nvidia, amd});
    CHECK(d.hints.empty());
  }
}

// ---- the same, with the fake plugins loaded from disk --------------------------------------

namespace {

Discovery load_fakes(std::vector<std::string> names) {
  std::vector<std::string> dirs;
  for (const auto& n : names) dirs.push_back(fixture_dir(n));
  return discover_plugins(only_dirs(dirs));
}

}  // namespace

TEST_CASE("loaded fakes: auto, explicit, no-gpu, prefer, require, hints") {
  Discovery all = load_fakes({"cpu", "npu", "mps", "rocm", "cuda", "newgpu", "probe-fails", "score-zero"});
  REQUIRE(all.plugins.size() == 8);
  for (const auto& r : all.plugins) {
    INFO(r.name << ": " << to_string(r.status) << " - " << r.reason);
    bool bad = r.name == "probe-fails" || r.name == "score-zero";
    CHECK(r.status == (bad ? PluginStatus::unavailable : PluginStatus::usable));
  }

  SUBCASE("auto order") {
    Decision d = negotiate(all.plugins, DeviceRequest{});
    INFO(explain(d));
    REQUIRE(d.ok);
    CHECK(selected_id(d) == "cuda:0");
    std::vector<std::string> eligible;
    for (const auto& c : d.candidates)
      if (c.eligible) eligible.push_back(c.device.id);
    // By declared kind, then score: the out-of-tree newgpu (45) between cuda (50) and rocm (40).
    CHECK(eligible == std::vector<std::string>{"cuda:0", "cuda:1", "newgpu:0", "rocm:0", "mps:0", "npu:0", "cpu:0"});
    const Candidate* zero = candidate(d, "score-zero:0");
    REQUIRE(zero);
    CHECK_FALSE(zero->eligible);
    CHECK(any_contains(d.reasons, "probe-fails"));

    Discovery fewer = load_fakes({"cpu", "npu", "mps", "rocm"});
    CHECK(selected_id(negotiate(fewer.plugins, DeviceRequest{})) == "rocm:0");
    Discovery fewest = load_fakes({"cpu", "npu", "mps"});
    CHECK(selected_id(negotiate(fewest.plugins, DeviceRequest{})) == "mps:0");
    Discovery cpu_npu = load_fakes({"cpu", "npu"});
    CHECK(selected_id(negotiate(cpu_npu.plugins, DeviceRequest{})) == "npu:0");
    Discovery cpu_newgpu = load_fakes({"cpu", "newgpu"});
    Decision n = negotiate(cpu_newgpu.plugins, DeviceRequest{});
    INFO(explain(n));
    CHECK(selected_id(n) == "newgpu:0");
    CHECK(contains(n.selected->reason, "discrete GPU ranks highest"));
  }
  SUBCASE("explicit") {
    CHECK(selected_id(negotiate(all.plugins, ask("cuda:1"))) == "cuda:1");
    Decision d = negotiate(all.plugins, ask("cuda:5"));
    INFO(explain(d));
    CHECK_FALSE(d.ok);
    CHECK(d.explicit_request);
    CHECK(contains(d.error, "cuda:0"));
    Decision z = negotiate(all.plugins, ask("score-zero"));
    INFO(explain(z));
    CHECK_FALSE(z.ok);
    CHECK(contains(z.error, "no driver"));
    Decision f = negotiate(all.plugins, ask("probe-fails"));
    INFO(explain(f));
    CHECK_FALSE(f.ok);
    CHECK(contains(f.error, "no such hardware"));
  }
  SUBCASE("no-gpu, prefer, require") {
    DeviceRequest no_gpu;
    no_gpu.no_gpu = true;
    CHECK(selected_id(negotiate(all.plugins, no_gpu)) == "cpu:0");
    DeviceRequest prefer;
    prefer.prefer = {"npu"};
    CHECK(selected_id(negotiate(all.plugins, prefer)) == "npu:0");
    DeviceRequest require;
    require.require = {"bf16"};
    Discovery no_cuda = load_fakes({"cpu", "mps", "rocm"});
    CHECK(selected_id(negotiate(no_cuda.plugins, require)) == "rocm:0");
    require.require = {"fused_adamw"};
    CHECK(selected_id(negotiate(all.plugins, require)) == "cuda:0");
  }
  SUBCASE("hints") {
    Discovery no_cuda = load_fakes({"cpu", "rocm"});
    Decision d = negotiate(no_cuda.plugins, DeviceRequest{}, {PciGpu{"0000:65:00.0", 0x10de, 0x2684, 0x030000}});
    INFO(explain(d));
    REQUIRE(d.hints.size() == 1);
    CHECK(contains(d.hints[0], "cuda"));
    CHECK(negotiate(all.plugins, DeviceRequest{}, {PciGpu{"0000:65:00.0", 0x10de, 0x2684, 0x030000}}).hints.empty());
  }
}

TEST_CASE("Context: an explicit request that cannot be had is DeviceUnavailableError (exit 3)") {
  ContextOptions o;
  o.loader = only_dirs({fixture_dir("cpu"), fixture_dir("rocm"), fixture_dir("cuda")});
  o.settings.env = std::map<std::string, std::string>{};

  SUBCASE("unavailable") {
    o.settings.cli = {{"device", "cuda:5"}};
    auto ctx = Context::create(o);
    INFO(explain(ctx->decision()));
    CHECK_FALSE(ctx->decision().ok);
    CHECK(ctx->decision().explicit_request);
    CHECK_THROWS_AS(ctx->require_device(), DeviceUnavailableError);
    try {
      ctx->require_device();
    } catch (const DeviceUnavailableError& e) {
      CHECK(contains(e.what(), "cuda:5"));
      CHECK(contains(e.what(), "cuda:0"));
    }
  }
  SUBCASE("available, from the environment layer") {
    o.settings.env = std::map<std::string, std::string>{{"ACCELKIT_DEVICE", "rocm"}};
    auto ctx = Context::create(o);
    INFO(explain(ctx->decision()));
    REQUIRE(ctx->decision().ok);
    CHECK(ctx->require_device().device.id == "rocm:0");
    CHECK(contains(ctx->decision().selected->reason, "ACCELKIT_DEVICE"));
    auto dev = ctx->open_selected();
    REQUIRE(dev);
    CHECK(dev->info().id == "rocm:0");
  }
  SUBCASE("--no-gpu") {
    o.settings.cli = {{"no_gpu", "true"}};
    auto ctx = Context::create(o);
    CHECK(ctx->require_device().device.id == "cpu:0");
  }
}

}  // namespace negotiation_suite
