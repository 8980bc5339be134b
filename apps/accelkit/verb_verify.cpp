// accelkit verify [--quick] [--device DEV | --all] [--seed N] [--json]: every capability the device's
// plugin claims, checked here against LibTorch's own results (accelkit::conformance).
// Exit 0 when nothing failed, 1 when a check failed, 3 when the requested device is unavailable.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "accelkit/conformance.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/settings.hpp"
#include "cli.hpp"
#include "format.hpp"
#include "json_out.hpp"

namespace accelkit::cli {
namespace {

using conformance::CheckResult;
using conformance::DeviceReport;
using conformance::Outcome;

void print_result(const CheckResult& r) {
  char head[160];
  std::snprintf(head, sizeof head, "  %-7s %-16s %s (%.2f s)", conformance::to_string(r.outcome), r.capability.c_str(),
                r.name.c_str(), r.seconds);
  std::cout << head << "\n          " << r.detail << '\n' << std::flush;
}

Json result_json(const CheckResult& r) {
  return Json{{"capability", r.capability},
              {"name", r.name},
              {"outcome", r.outcome == Outcome::pass ? "pass" : r.outcome == Outcome::fail ? "fail" : "skipped"},
              {"detail", r.detail},
              {"error", r.error ? Json(*r.error) : Json(nullptr)},
              {"tolerance", r.tolerance ? Json(*r.tolerance) : Json(nullptr)},
              {"seconds", r.seconds}};
}

}  // namespace

int verb_verify(const Invocation& inv) {
  const ContextOptions base = inv.context_options();
  std::vector<std::string> ids{""};  // the negotiated device
  try {
    if (inv.all) {
      auto ctx = Context::create(Settings::resolve(base.settings), base.loader);
      ids = conformance::usable_devices(*ctx);
      if (ids.empty()) return report_device_failure(*ctx);
    }
  } catch (const SettingsError& e) {
    std::cerr << "accelkit: " << e.what() << '\n';
    return kExitUsage;
  }

  conformance::CheckOptions options;
  options.quick = inv.quick;
  options.seed = inv.seed;
  if (!inv.json) options.on_result = print_result;
  Json devices = Json::array();
  int failed = 0;
  for (const auto& id : ids) {
    DeviceReport report;
    if (!inv.json)
      std::cout << (devices.empty() ? "" : "\n") << "Verifying " << (id.empty() ? "the negotiated device" : id)
                << (inv.quick ? " (quick)" : "") << "...\n"
                << std::flush;
    try {
      report = conformance::check_runtime_device(base, id, options);
    } catch (...) {
      return start_error_exit();
    }
    failed += report.failed();
    const int passed = report.count(Outcome::pass), skipped = report.count(Outcome::skipped);
    if (inv.json) {
      Json checks = Json::array();
      for (const auto& r : report.results) checks.push_back(result_json(r));
      devices.push_back(Json{{"device", report.device.id},
                             {"name", report.device.name},
                             {"capabilities", capability_names(report.device.capabilities)},
                             {"seed", report.seed},
                             {"seconds", report.seconds},
                             {"passed", passed},
                             {"failed", report.failed()},
                             {"skipped", skipped},
                             {"checks", std::move(checks)}});
    } else {
      devices.push_back(report.device.id);
      char tail[128];
      std::snprintf(tail, sizeof tail, ": %d passed, %d failed, %d skipped in %.1f s (inputs: --seed %llu)\n", passed,
                    report.failed(), skipped, report.seconds, static_cast<unsigned long long>(report.seed));
      std::cout << report.device.id << " " << report.device.name << tail;
      // A device served by the device-generic plugin: say so, and what it lacks.
      for (const auto& [k, v] : report.device.properties)
        if (k == "served by" || k == "lacks") std::cout << "  " << k << ": " << v << '\n';
      std::cout << std::flush;
      for (const auto& r : report.results)
        if (r.outcome == Outcome::fail)
          std::cerr << "accelkit: verify: " << report.device.id << ": " << r.capability << ": " << r.detail << '\n';
    }
  }
  if (inv.json) print_json(Json{{"ok", failed == 0}, {"failed", failed}, {"devices", std::move(devices)}});
  return failed ? kExitFailure : kExitOk;
}

}  // namespace accelkit::cli
