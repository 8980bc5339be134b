// accelkit report [--apply]: the decision, settings with provenance, the precision plan, and
// (with --apply) the plan applied to LibTorch and read back.
#include <algorithm>
#include <iostream>

#include <ATen/Parallel.h>
#include <torch/csrc/jit/serialization/import.h>

#include "accelkit/conformance.hpp"
#include "accelkit/adamw_choice.hpp"
#include "accelkit/alignment.hpp"
#include "accelkit/bench.hpp"
#include "accelkit/distributed.hpp"
#include "accelkit/model_file.hpp"
#include "accelkit/new_device.hpp"
#include "accelkit/sdk/precision.hpp"
#include "cli.hpp"
#include "format.hpp"
#include "accelkit/memory_scope.hpp"
#include "json_out.hpp"
#include "render.hpp"
#include "render_autotune.hpp"
#include "render_batch.hpp"
#include "render_routing.hpp"
#include "table.hpp"

namespace accelkit::cli {
namespace {

struct AppliedRow {
  std::string key;
  std::string read;
  std::optional<std::string> intended;
  std::optional<bool> match;  // unset when the plan says nothing about the key
};

std::string on_off(bool b) { return b ? "on" : "off"; }

Json request_json(const PrecisionRequest& r) {
  return Json{{"precision", precision_name(r.precision)}, {"tf32", to_string(r.tf32)}, {"threads", r.threads},
              {"blas_kernels", to_string(r.blas)}, {"kernels", to_string(r.kernels)}};
}

Json plan_json(const PrecisionPlan& p) {
  return Json{{"dtype", to_string(p.dtype)}, {"autocast", p.autocast}, {"tf32", p.tf32},
              {"loss_scaling", p.loss_scaling}, {"threads", p.threads},
              {"blas_kernels", p.blas_kernels}, {"kernels", p.kernels}, {"reasons", p.reasons}};
}

void render_plan(std::ostream& out, const PrecisionRequest& r, const PrecisionPlan& p) {
  out << "Precision plan (asked: precision=" << precision_name(r.precision) << ", tf32=" << to_string(r.tf32)
      << ", threads=" << (r.threads ? std::to_string(r.threads) : "auto") << "):\n";
  Table t({"", ""});
  t.hide_header();
  t.add_row({"dtype", to_string(p.dtype)});
  t.add_row({"autocast", on_off(p.autocast)});
  t.add_row({"tf32", on_off(p.tf32)});
  t.add_row({"loss scaling", on_off(p.loss_scaling)});
  t.add_row({"threads", p.threads > 0 ? std::to_string(p.threads) : "LibTorch default"});
  t.add_row({"blas kernels", p.blas_kernels.empty() ? "the library's own" : p.blas_kernels});
  std::string ops;
  for (const auto& op : p.kernels) ops += (ops.empty() ? "the plugin's for " : ", ") + op;
  t.add_row({"operator kernels", ops.empty() ? "LibTorch's" : ops + " (LibTorch's for the rest)"});
  t.print(out);
  if (!p.reasons.empty()) {
    out << "  why:\n";
    for (const auto& reason : p.reasons) out << "    - " << reason << '\n';
  }
}

}  // namespace

int verb_report(const Invocation& inv, Context& ctx) {
  // --model: read before anything is printed, so a bad file is one line.
  std::optional<torch::jit::Module> model;
  std::vector<at::Tensor> inputs;  // --measure --input: what the convolutions are timed on
  if (!inv.report_model.empty()) {
    try {
      inputs = example_inputs(inv.inputs);
    } catch (const std::exception& e) {
      std::cerr << "accelkit: " << e.what() << '\n';
      return kExitUsage;
    }
    try {
      if (inspect_model_file(inv.report_model).format != ModelFormat::torchscript)
        throw std::invalid_argument("not a TorchScript file (torch.jit.save): --model checks TorchScript modules");
      model = torch::jit::load(inv.report_model);
    } catch (const std::exception& e) {
      std::cerr << "accelkit: --model " << inv.report_model << ": " << torch_error_summary(e.what()) << '\n';
      return kExitUsage;
    }
  }
  const Decision& d = ctx.decision();
  Json j;
  if (inv.json) {
    j["decision"] = decision_json(d);
    j["settings"] = settings_json(ctx.settings());
    if (d.ok) j["autotune"] = autotune_cache_json(ctx);
    if (d.ok) j["batch_finder"] = batch_cache_json(ctx);
    if (d.ok) j["routing"] = routing_json(ctx);
  } else {
    std::ostream& out = std::cout;
    render_selected(out, d);
    out << '\n';
    render_candidates(out, d);
    out << '\n';
    render_settings(out, ctx.settings());
    out << '\n';
    if (d.ok) {
      render_autotune_cache(out, ctx);
      out << '\n';
      render_batch_cache(out, ctx);
      out << '\n';
      render_routing(out, ctx);
      out << '\n';
    }
  }
  auto fail = [&](const std::string& what) {
    if (inv.json) {
      j["error"] = what;
      print_json(j);
    }
    std::cout << std::flush;
    std::cerr << "accelkit: " << what << '\n';
    return kExitFailure;
  };
  if (!d.ok) {
    if (inv.json) print_json(j);
    std::cout << std::flush;
    return report_device_failure(ctx);
  }

  std::shared_ptr<Device> device;
  try {
    device = ctx.open_selected();
  } catch (const std::exception& e) {
    return fail("cannot open " + d.selected->device.id + ": " + e.what());
  }
  if (!device) return fail("cannot open " + d.selected->device.id);
  auto precision = device->precision();
  if (!precision.ok()) return fail(d.selected->device.id + " has no precision rules: " + precision.status().message());

  const PrecisionRequest request = precision_request_from(ctx.config());
  auto plan = precision.value()->plan(request);
  if (!plan.ok())
    return fail("precision plan refused for " + d.selected->device.id + ": " + plan.status().message());

  if (inv.json) {
    j["precision"] = Json{{"device", d.selected->device.id}, {"request", request_json(request)},
                          {"plan", plan_json(plan.value())}};
  } else {
    render_plan(std::cout, request, plan.value());
  }

  // The input pipeline: how far ahead batches are produced, and where the wait is measured.
  {
    const Setting<int>& pf = ctx.config().prefetch;
    const std::string where =
        "the steps' wait for data is measured where steps run: accelkit train ends with 'data: ...' (JSON "
        "data.wait_ms_per_step), accelkit bench --data-ms MS shows it for a producer of MS ms, Prefetcher::stats() in a program";
    if (inv.json) {
      j["data_pipeline"] = Json{{"prefetch", *pf}, {"from", pf.from()}, {"wait_measured_by", where}};
    } else {
      std::cout << "\nData pipeline: prefetch " << *pf << " (from " << pf.from() << "): "
                << (*pf > 0 ? "batches produced " + std::to_string(*pf) + " ahead on a background thread"
                            : std::string("batches produced in the step"))
                << "\n  " << where << '\n';
    }
  }

  // A data-parallel launcher's environment, as dist::init would read it (no rendezvous here).
  {
    const DeviceInfo& info = d.selected->device;
    const auto offered = info.capabilities.extra.find(kCollectivesKey);
    const std::string collectives = offered == info.capabilities.extra.end() ? "" : offered->second;
    std::string launch_text, error;
    Json launch_json = nullptr;
    try {
      const dist::Launch l = dist::detect_launch();
      if (l.world_size > 1) {
        launch_text = l.launcher + ", rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) +
                      ", local rank " + std::to_string(l.local_rank) + " of " + std::to_string(l.local_world_size) +
                      ", rendezvous at " + l.master_addr + ":" + std::to_string(l.master_port);
        launch_json = Json{{"launcher", l.launcher}, {"rank", l.rank}, {"world_size", l.world_size},
                           {"local_rank", l.local_rank}, {"local_world_size", l.local_world_size},
                           {"master", l.master_addr + ":" + std::to_string(l.master_port)}};
        if (info.kind == DeviceKind::cpu && !ctx.config().threads.user_set()) {
          const int each = dist::threads_per_rank(info.cores, l.local_world_size);
          launch_text += "; each rank gets " + std::to_string(each) + " thread" + (each == 1 ? "" : "s") + " (" +
                         std::to_string(info.cores) + " physical cores shared by " +
                         std::to_string(l.local_world_size) + " local ranks)";
          launch_json["threads_per_rank"] = each;
        }
      }
    } catch (const dist::LaunchError& e) {
      error = e.what();
    }
    const std::string backend = *ctx.config().dist_backend;
    if (inv.json) {
      j["data_parallel"] = Json{{"collectives", collectives}, {"dist_backend", backend},
                                {"launch", launch_json}, {"error", error.empty() ? Json(nullptr) : Json(error)}};
    } else {
      std::cout << "\nData-parallel: " << info.id << " all-reduces with "
                << (collectives.empty() ? std::string("nothing (its plugin names no collective backend)") : collectives)
                << "; dist_backend = " << backend << " (from " << ctx.config().dist_backend.from() << ")\n  "
                << (!error.empty()          ? "launcher variables unusable: " + error
                    : launch_text.empty() ? std::string("no launcher: one process")
                                          : "launched by " + launch_text)
                << '\n';
    }
  }

  // The device's memory now, as its plugin reports it (Device::memory()).
  {
    const Result<MemoryStats> mem = device->memory();
    auto bytes = [](const std::optional<std::uint64_t>& b) { return b ? Json(*b) : Json(nullptr); };
    if (inv.json) {
      j["memory"] = mem.ok() ? Json{{"in_use", bytes(mem.value().in_use)},   {"peak", bytes(mem.value().peak)},
                                    {"reserved", bytes(mem.value().reserved)}, {"total", bytes(mem.value().total)},
                                    {"available", bytes(mem.value().available)}, {"source", mem.value().source},
                                    {"note", mem.value().note}}
                             : Json{{"error", mem.status().message()}};
    } else if (!mem.ok()) {
      std::cout << "\nMemory: not reported (" << mem.status().message() << ")\n";
    } else {
      const MemoryStats& m = mem.value();
      auto text = [](const std::optional<std::uint64_t>& b) { return b ? format_bytes(*b) : std::string("n/a"); };
      std::cout << "\nMemory (" << m.source << "):\n  in use " << text(m.in_use) << ", peak " << text(m.peak)
                << ", reserved " << text(m.reserved) << "; device total " << text(m.total) << ", available "
                << text(m.available) << '\n';
      if (!m.note.empty()) std::cout << "  " << m.note << '\n';
    }
  }

  // A device type LibTorch does not know: registered now (as a program's Runtime::start would),
  // and what it runs itself, what falls back, what this LibTorch lacks for it.
  if (new_device::declares(d.selected->device)) {
    std::string torch_device;
    try {
      torch_device = new_device::activate(d.selected->plugin, *device);
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    const new_device::State st = new_device::state();
    if (inv.json) {
      j["new_device"] = Json{{"torch_device", torch_device}, {"backend", st.backend}, {"torch_type", st.torch_type},
                             {"native_kernels", st.native_kernels}, {"notes", st.notes}};
    } else {
      const std::string native = join(st.native_kernels, ", ");
      std::cout << "\nNew device type (LibTorch's PrivateUse1, registered by accelkit): " << torch_device << '\n'
                << "  runs itself: allocation, views and copies (the host's, on the plugin's memory)"
                << (native.empty() ? std::string() : "; native " + native) << '\n'
                << "  everything else: on the CPU through the fallback, counted per operator ('accelkit --device "
                << d.selected->plugin << " bench' lists them)\n";
      for (const auto& n : st.notes) std::cout << "  this LibTorch: " << n << '\n';
    }
  }

  // --model: the model's sizes against the multiples the device's plugin states, for the
  // plan's dtype.
  if (model) {
    // Measured under the plan's threads (applied for that, as --apply would).
    if (inv.measure) at::set_num_threads(std::max(1, plan.value().threads > 0 ? plan.value().threads : at::get_num_threads()));
    AlignmentReport a;
    try {
      a = check_alignment(*model, d.selected->device, to_string(plan.value().dtype),
                          inv.measure && d.selected->device.torch_device == "cpu", inputs);
    } catch (const std::invalid_argument& e) {
      std::cerr << "accelkit: --model " << inv.report_model << ": " << e.what() << '\n';
      return kExitUsage;
    }
    if (inv.json) {
      Json issues = Json::array();
      for (const auto& i : a.issues)
        issues.push_back(Json{{"layer", i.layer}, {"op", i.op}, {"dim", i.dim}, {"size", i.size}, {"padded", i.padded},
                              {"ms", i.ms > 0 ? Json(i.ms) : Json(nullptr)},
                              {"padded_ms", i.padded_ms > 0 ? Json(i.padded_ms) : Json(nullptr)},
                              {"timed_on", i.timed_on.empty() ? Json(nullptr) : Json(i.timed_on)}});
      j["alignment"] = Json{{"model", inv.report_model}, {"dtype", a.dtype}, {"multiple", a.multiple}, {"layers", a.layers},
                            {"issues", std::move(issues)}, {"not_timed", a.not_timed}};
    } else {
      std::cout << "\nDimension alignment of " << inv.report_model << ":\n  " << a.summary();
    }
  }

  // The AdamW implementation (adamw_choice.hpp): the cached measurement at the plan's threads;
  // with --apply (the plan's threads in force) measured now when there is none.
  auto optimizers = device->optimizer();
  auto adamw = [&](bool measure) {
    if (!optimizers.ok() || !optimizers.value()) {
      const std::string why = optimizers.ok() ? "none" : optimizers.status().message();
      if (inv.json) j["adamw"] = Json{{"implementation", nullptr}, {"why", why}};
      else std::cout << "\nAdamW: the plugin has no optimizer (" << why << "); torch::optim::AdamW\n";
      return;
    }
    AdamWImplChoice c = cached_adamw_implementation(ctx, *optimizers.value(), plan.value().threads);
    if (c.origin.empty() && measure)
      c = choose_adamw_implementation(ctx, *optimizers.value(), c10::Device(d.selected->device.torch_device),
                                      *ctx.config().autotune_cache);
    if (inv.json) {
      Json times = Json::object();
      for (const auto& [name, ms] : c.median_ms) times[name] = ms;
      j["adamw"] = Json{{"implementation", c.origin.empty() ? Json(nullptr) : Json(c.name)},
                        {"description", c.description}, {"origin", c.origin}, {"median_ms", times},
                        {"cache_file", c.cache_file}, {"why", c.why}};
      return;
    }
    std::cout << "\nAdamW implementation:\n";
    if (c.origin.empty())
      std::cout << "  not measured yet for " << plan.value().threads << " threads (the first make_adamw, e.g. accelkit "
                << "bench, measures it; 'accelkit report --apply' measures it now)\n";
    else
      std::cout << "  " << c.name << ": " << c.description << "\n  why: " << c.why
                << (c.cache_file.empty() ? "" : "\n  cache: " + c.cache_file) << '\n';
  };

  if (!inv.apply) {
    adamw(false);
    if (inv.json) print_json(j);
    else std::cout << "\n(run 'accelkit report --apply' to apply the plan and read it back from LibTorch)\n";
    return kExitOk;
  }

  const Status applied = precision.value()->apply(plan.value());
  if (!applied.is_ok()) return fail("applying the precision plan failed: " + applied.message());
  try {
    adamw(true);
  } catch (const std::exception& e) {
    return fail(std::string("measuring the AdamW implementations failed: ") + e.what());
  }
  auto read = precision.value()->read_back();
  if (!read.ok()) return fail("reading the applied values back failed: " + read.status().message());

  std::vector<AppliedRow> rows;
  int mismatches = 0;
  for (const auto& v : read.value()) {
    AppliedRow row{v.key, v.value, conformance::intended_value(v, plan.value()), std::nullopt};
    if (row.intended) {
      row.match = conformance::same_value(*row.intended, v.value);
      if (!*row.match) ++mismatches;
    }
    rows.push_back(std::move(row));
  }

  if (inv.json) {
    Json values = Json::array();
    for (const auto& r : rows)
      values.push_back(Json{{"key", r.key},
                            {"value", r.read},
                            {"intended", r.intended ? Json(*r.intended) : Json(nullptr)},
                            {"match", r.match ? Json(*r.match) : Json(nullptr)}});
    j["applied"] = Json{{"values", std::move(values)}, {"mismatches", mismatches}};
    print_json(j);
  } else {
    std::ostream& out = std::cout;
    out << "\nApplied, then read back from LibTorch:\n";
    Table t({"KEY", "INTENDED", "READ BACK", ""});
    for (const auto& r : rows)
      t.add_row({r.key, r.intended.value_or("-"), r.read,
                 !r.match ? "" : (*r.match ? "ok" : "MISMATCH")});
    if (rows.empty()) out << "  (the plugin reported no values)\n";
    else t.print(out);
    out << std::flush;
  }
  if (mismatches) {
    std::cerr << "accelkit: " << mismatches << " applied value" << (mismatches == 1 ? "" : "s")
              << " read back different from the plan\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace accelkit::cli
