// accelkit::conformance and `accelkit verify`: honest plugins pass, each lie is caught with the
// capability named and the measured difference given.
#include <algorithm>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "accelkit/conformance.hpp"
#include "accelkit/op_class.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "cli_process.hpp"
#include "cpu_runtime.hpp"
#include "torch_doctest.hpp"

namespace verify_test {
using namespace accelkit;
using namespace accelkit::conformance;
using accelkit::test::run_cli;

std::string fixture_dir(const std::string& name) { return std::string(ACCELKIT_FIXTURE_PLUGIN_DIR) + "/" + name; }

std::vector<const CheckResult*> failures(const DeviceReport& r) {
  std::vector<const CheckResult*> out;
  for (const auto& c : r.results)
    if (c.outcome == Outcome::fail) out.push_back(&c);
  return out;
}

bool ran(const DeviceReport& r, const std::string& capability) {
  return std::any_of(r.results.begin(), r.results.end(),
                     [&](const CheckResult& c) { return c.capability == capability && c.outcome != Outcome::skipped; });
}

std::string dump(const DeviceReport& r) {
  std::string s;
  for (const auto& c : r.results)
    s += std::string(to_string(c.outcome)) + " " + c.capability + ": " + c.name + " - " + c.detail + "\n";
  return s;
}

CheckOptions quick() {
  CheckOptions o;
  o.quick = true;
  return o;
}

TEST_CASE("the CPU plugin passes every check it claims") {
  auto rt = accelkit::test::start_cpu_runtime();
  CheckOptions o = quick();
  o.request = precision_request_from(rt->context().config());
  const auto report = check_device(*rt->device_handle(), o);
  INFO(dump(report));
  CHECK(report.failed() == 0);
  CHECK(ran(report, "plan"));
  CHECK(ran(report, "fp32"));
  CHECK(ran(report, "training"));
  const auto& caps = rt->device_handle()->info().capabilities;
  for (const char* cap : {"bf16", "fused_adamw", "fused_sgd", "master_weights", "memory_stats", "utilisation"})
    if (caps.has(cap)) CHECK_MESSAGE(ran(report, cap), cap);
  // Every result says what it measured or why it was skipped.
  for (const auto& c : report.results) CHECK_FALSE(c.detail.empty());
  // The device's own plan is back afterwards.
  CHECK(at::get_num_threads() == rt->precision().threads);
}

TEST_CASE("an honest fixture plugin passes through check_plugin_dir, its thermal sensor included") {
  const auto reports = check_plugin_dir(fixture_dir("honest"), quick());
  REQUIRE(reports.size() == 1);
  INFO(dump(reports[0]));
  CHECK(reports[0].device.id == "honest:0");
  CHECK(reports[0].failed() == 0);
  for (const char* cap : {"plan", "fp32", "bf16", "fused_adamw", "thermal", "graph_capture", "training"})
    CHECK_MESSAGE(ran(reports[0], cap), cap);
  // Flash attention: LibTorch's CPU kernel where it has SDPA switches, else skipped saying so.
  CHECK(ran(reports[0], "sdpa_flash") == compat::kSdpaControllable);
}

TEST_CASE("a plugin's own process group passes the collectives check: a world of one all-reduces and broadcasts") {
  const auto reports = check_plugin_dir(fixture_dir("honest-groups"), quick());
  REQUIRE(reports.size() == 1);
  INFO(dump(reports[0]));
  CHECK(reports[0].failed() == 0);
  CHECK(ran(reports[0], "collectives"));
  const bool made = std::any_of(reports[0].results.begin(), reports[0].results.end(), [](const CheckResult& c) {
    return c.capability == "collectives" && c.detail.find("all-reduce and broadcast over one rank") != std::string::npos;
  });
  CHECK(made);
}

TEST_CASE("routed operation classes run where the route sends them and match fp64") {
  auto rt = accelkit::test::start_cpu_runtime();
  CheckOptions o = quick();
  o.training = false;
  o.request = precision_request_from(rt->context().config());
  for (const auto& [op, name] : kOpClassNames) {
    Route r;
    r.op = op;
    r.device = c10::Device(c10::kCPU);
    r.on_device = false;  // as a GPU's plugin sending the class to the CPU would have it
    r.origin = "file";
    o.routes.push_back(r);
  }
  const auto report = check_device(*rt->device_handle(), o);
  INFO(dump(report));
  CHECK(report.failed() == 0);
  for (const auto& [op, name] : kOpClassNames) CHECK_MESSAGE(ran(report, "route." + std::string(name)), name);
}

TEST_CASE("each lie fails the check of the capability it lies about, with the measured difference") {
  struct Lie {
    const char* plugin;
    const char* capability;
    const char* says;  // in the failure's detail
  };
  const Lie lies[] = {
      {"liar-bf16", "bf16", "returned fp32, not bf16"},
      {"liar-adamw", "fused_adamw", "max |w - w_ref| / max |w_ref|"},
      {"liar-thermal", "thermal", "reads 0 C"},
      {"liar-threads", "plan", "threads: plan"},
      {"liar-capture", "graph_capture", "max |w_captured - w_eager|"},
      {"liar-sdpa", "sdpa_mem_efficient", "threw"},
      {"liar-groups", "collectives", "offered, but process_group() says"},
  };
  for (const auto& lie : lies) {
    CAPTURE(lie.plugin);
    if (std::string(lie.plugin) == "liar-sdpa" && !compat::kSdpaControllable) continue;  // skipped there: no SDPA switches
    const auto reports = check_plugin_dir(fixture_dir(lie.plugin), quick());
    REQUIRE(reports.size() == 1);
    INFO(dump(reports[0]));
    const auto failed = failures(reports[0]);
    REQUIRE_FALSE(failed.empty());
    const bool named = std::any_of(failed.begin(), failed.end(), [&](const CheckResult* c) {
      return c->capability == lie.capability && c->detail.find(lie.says) != std::string::npos;
    });
    CHECK(named);
    // Only that lie: the honest parts of the same plugin still pass (the bf16 liar's plan fails
    // too, since LibTorch has no autocast where its plan says so).
    for (const auto* c : failed) CHECK((c->capability == lie.capability || (std::string(lie.plugin) == "liar-bf16" && c->capability == "plan")));
  }
  // The drift is a figure, above its tolerance.
  const auto adamw = check_plugin_dir(fixture_dir("liar-adamw"), quick());
  for (const auto* c : failures(adamw[0])) {
    REQUIRE(c->error);
    REQUIRE(c->tolerance);
    CHECK(*c->error > *c->tolerance);
  }
}

TEST_CASE("read-back values are compared by meaning, not spelling") {
  PrecisionPlan plan;
  plan.autocast = true;
  plan.dtype = Dtype::bf16;
  plan.threads = 2;
  CHECK(intended_value({"autocast_cpu_dtype", "torch.bfloat16", PlanField::autocast_dtype}, plan) == std::string("bf16"));
  CHECK(same_value("bf16", "c10::ScalarType::BFloat16"));
  CHECK(same_value("true", "1"));
  CHECK_FALSE(same_value("2", "1"));
  CHECK_FALSE(intended_value({"x", "y", PlanField::other}, plan).has_value());
  plan.threads = 0;
  CHECK_FALSE(intended_value({"num_threads", "2", PlanField::threads}, plan).has_value());
}

TEST_CASE("accelkit verify: exit codes, the summary, JSON") {
  const std::string cpu = accelkit::test::cpu_plugin_dir();
  auto ok = run_cli({"--plugin-path", cpu, "verify", "--quick"});
  INFO(accelkit::test::describe(ok));
  CHECK(ok.code == 0);
  CHECK(ok.out.find("pass    plan") != std::string::npos);
  CHECK(ok.out.find("0 failed") != std::string::npos);

  auto json = run_cli({"--plugin-path", cpu, "verify", "--quick", "--json"});
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  CHECK(j["ok"] == true);
  REQUIRE(j["devices"].size() == 1);
  CHECK(j["devices"][0]["device"] == "cpu:0");
  CHECK(j["devices"][0]["failed"] == 0);
  CHECK(j["devices"][0]["checks"].size() >= 4);

  // --seed repeats a run's inputs: the same figures.
  auto seeded = [&] {
    auto r = run_cli({"--plugin-path", cpu, "verify", "--quick", "--seed", "7", "--json"});
    REQUIRE(r.code == 0);
    const auto d = nlohmann::json::parse(r.out)["devices"][0];
    CHECK(d["seed"] == 7);
    for (const auto& c : d["checks"])
      if (c["capability"] == "fp32") return c["error"].get<double>();
    FAIL("no fp32 check");
    return 0.0;
  };
  CHECK(seeded() == seeded());
  CHECK(run_cli({"--plugin-path", cpu, "verify", "--seed", "0"}).code == 2);

  auto lie = run_cli({"--plugin-path", fixture_dir("liar-thermal"), "verify", "--quick", "--device", "liar-thermal"});
  CHECK(lie.code == 1);
  CHECK(lie.err.find("liar-thermal:0: thermal: temperature_c reads 0 C") != std::string::npos);

  auto missing = run_cli({"--plugin-path", cpu, "verify", "--quick", "--device", "nosuch"});
  CHECK(missing.code == 3);
  CHECK(missing.err.find("unavailable") != std::string::npos);

  auto both = run_cli({"--plugin-path", cpu, "verify", "--all", "--device", "cpu"});
  CHECK(both.code == 2);
  auto wrong_verb = run_cli({"--plugin-path", cpu, "info", "--quick"});
  CHECK(wrong_verb.code == 2);
}

TEST_CASE("accelkit verify --all: every usable device, a reference device among them") {
  const std::string dir = accelkit::test::private_plugin_dir({"cpu", "hostmem"});
  auto r = run_cli({"--plugin-path", dir, "verify", "--all", "--quick", "--json"});
  INFO(accelkit::test::describe(r));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> ids;
  for (const auto& d : j["devices"]) ids.push_back(d["device"]);
  CHECK(ids == std::vector<std::string>{"hostmem:0", "cpu:0"});  // the new device type first
}

}  // namespace verify_test
