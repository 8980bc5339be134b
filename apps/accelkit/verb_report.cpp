// accelkit report [--apply]: the decision, settings with provenance, the precision plan, and
// (with --apply) the plan applied to LibTorch and read back.
#include <algorithm>
#include <iostream>

#include <ATen/Parallel.h>

#include "accelkit/conformance.hpp"
#include "accelkit/adamw_choice.hpp"
#include "accelkit/alignment.hpp"
#include "accelkit/bench.hpp"
#include "accelkit/distributed.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/model_file.hpp"
#include "accelkit/new_device.hpp"
#include "accelkit/sdk/precision.hpp"
#include "accelkit/sdk/torch_compat_aoti.hpp"
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

// report --model: the TorchScript module, and the inputs --measure times its convolutions on;
// or a .pt2 package's facts (loaded on the selected device later, to say whether it runs there).
struct ReportModel {
  std::optional<torch::jit::Module> module;
  std::vector<at::Tensor> inputs;
  std::optional<ModelFileFacts> package;
};

// Reads --model and its --input shapes; false after saying why (exit 2).
bool load_report_model(const Invocation& inv, ReportModel& model) {
  try {
    model.inputs = example_inputs(inv.inputs);
  } catch (const std::exception& e) {
    std::cerr << "accelkit: " << e.what() << '\n';
    return false;
  }
  try {
    ModelFileFacts facts = inspect_model_file(inv.report_model);
    if (facts.format == ModelFormat::aoti_package) {
      if (!compat::AotiPackage::available)
        throw std::invalid_argument("a .pt2 package (AOTInductor) needs LibTorch >= 2.6; this accelkit is built "
                                    "against LibTorch " + host_torch_version());
      if (inv.measure)
        throw std::invalid_argument("--measure times a TorchScript module's layers; a .pt2 package's are compiled "
                                    "into its library");
      model.package = std::move(facts);
      return true;
    }
    model.module = load_torchscript(inv.report_model);
  } catch (const ModelFileError& e) {
    std::cerr << "accelkit: report --model " << e.what() << '\n';  // what() begins with the file
    return false;
  } catch (const std::exception& e) {
    std::cerr << "accelkit: --model " << inv.report_model << ": " << torch_error_summary(e.what()) << '\n';
    return false;
  }
  return true;
}

// The decision, the settings and, when a device was selected, its cached decisions (auto-tuning,
// the batch finder's, the routing): into the JSON, or printed.
void report_negotiation(const Invocation& inv, Context& ctx, Json& j) {
  const Decision& d = ctx.decision();
  if (inv.json) {
    j["decision"] = decision_json(d);
    j["settings"] = settings_json(ctx.settings());
    if (d.ok) j["autotune"] = autotune_cache_json(ctx);
    if (d.ok) j["batch_finder"] = batch_cache_json(ctx);
    if (d.ok) j["routing"] = routing_json(ctx);
    return;
  }
  std::ostream& out = std::cout;
  render_selected(out, d);
  out << '\n';
  render_candidates(out, d);
  out << '\n';
  render_device_types(out, ctx.discovery().plugins);
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

// A failure after the report began: the JSON so far with the error, then the error on stderr.
int report_failure(const Invocation& inv, Json& j, const std::string& what) {
  if (inv.json) {
    j["error"] = what;
    print_json(j);
  }
  std::cout << std::flush;
  std::cerr << "accelkit: " << what << '\n';
  return kExitFailure;
}

// The selected device, opened, with its precision rules and their plan for the settings.
struct PlannedDevice {
  std::shared_ptr<Device> device;
  std::shared_ptr<Precision> precision;
  PrecisionRequest request;
  PrecisionPlan plan;
};

// Opens the selected device and plans its precision; nullopt with `error` saying why not.
std::optional<PlannedDevice> open_and_plan(Context& ctx, std::string& error) {
  const Decision& d = ctx.decision();
  PlannedDevice out;
  try {
    out.device = ctx.open_selected();
  } catch (const std::exception& e) {
    error = "cannot open " + d.selected->device.id + ": " + e.what();
    return std::nullopt;
  }
  if (!out.device) {
    error = "cannot open " + d.selected->device.id;
    return std::nullopt;
  }
  auto precision = out.device->precision();
  if (!precision.ok()) {
    error = d.selected->device.id + " has no precision rules: " + precision.status().message();
    return std::nullopt;
  }
  out.precision = precision.value();
  out.request = precision_request_from(ctx.config());
  auto plan = out.precision->plan(out.request);
  if (!plan.ok()) {
    error = "precision plan refused for " + d.selected->device.id + ": " + plan.status().message();
    return std::nullopt;
  }
  out.plan = plan.value();
  return out;
}

// The input pipeline: how far ahead batches are produced, and where the wait is measured.
void report_data_pipeline(const Invocation& inv, const Context& ctx, Json& j) {
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

// A data-parallel launcher's environment as text and JSON (both empty without a launcher),
// or why its variables cannot be used.
struct LaunchDescription {
  std::string text, error;
  Json json = nullptr;
};

LaunchDescription describe_launch(const Context& ctx, const DeviceInfo& info) {
  LaunchDescription out;
  try {
    const dist::Launch l = dist::detect_launch();
    if (l.world_size > 1) {
      out.text = l.launcher + ", rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) +
                 ", local rank " + std::to_string(l.local_rank) + " of " + std::to_string(l.local_world_size) +
                 ", rendezvous at " + l.master_addr + ":" + std::to_string(l.master_port);
      out.json = Json{{"launcher", l.launcher}, {"rank", l.rank}, {"world_size", l.world_size},
                      {"local_rank", l.local_rank}, {"local_world_size", l.local_world_size},
                      {"master", l.master_addr + ":" + std::to_string(l.master_port)}};
      if (info.kind == DeviceKind::cpu && !ctx.config().threads.user_set()) {
        const int each = dist::threads_per_rank(info.cores, l.local_world_size);
        out.text += "; each rank gets " + std::to_string(each) + " thread" + (each == 1 ? "" : "s") + " (" +
                    std::to_string(info.cores) + " physical cores shared by " +
                    std::to_string(l.local_world_size) + " local ranks)";
        out.json["threads_per_rank"] = each;
      }
    }
  } catch (const dist::LaunchError& e) {
    out.error = e.what();
  }
  return out;
}

// A data-parallel launcher's environment, as dist::init would read it (no rendezvous here).
void report_data_parallel(const Invocation& inv, const Context& ctx, const DeviceInfo& info, Json& j) {
  const auto offered = info.capabilities.extra.find(kCollectivesKey);
  const std::string collectives = offered == info.capabilities.extra.end() ? "" : offered->second;
  const LaunchDescription launch = describe_launch(ctx, info);
  const std::string backend = *ctx.config().dist_backend;
  if (inv.json) {
    j["data_parallel"] = Json{{"collectives", collectives}, {"dist_backend", backend},
                              {"launch", launch.json}, {"error", launch.error.empty() ? Json(nullptr) : Json(launch.error)}};
  } else {
    std::cout << "\nData-parallel: " << info.id << " all-reduces with "
              << (collectives.empty() ? std::string("nothing (its plugin names no collective backend)") : collectives)
              << "; dist_backend = " << backend << " (from " << ctx.config().dist_backend.from() << ")\n  "
              << (!launch.error.empty()      ? "launcher variables unusable: " + launch.error
                  : launch.text.empty() ? std::string("no launcher: one process")
                                        : "launched by " + launch.text)
              << '\n';
  }
}

// The device's memory now, as its plugin reports it (Device::memory()).
void report_memory(const Invocation& inv, Device& device, Json& j) {
  const Result<MemoryStats> mem = device.memory();
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

// A device type LibTorch does not know, registered as `torch_device`: what it runs itself,
// what falls back, what this LibTorch lacks for it.
void report_new_device(const Invocation& inv, const Candidate& selected, const std::string& torch_device, Json& j) {
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
              << selected.plugin << " bench' lists them)\n";
    for (const auto& n : st.notes) std::cout << "  this LibTorch: " << n << '\n';
  }
}

Json alignment_json(const std::string& model, const AlignmentReport& a) {
  Json issues = Json::array();
  for (const auto& i : a.issues)
    issues.push_back(Json{{"layer", i.layer}, {"op", i.op}, {"dim", i.dim}, {"size", i.size}, {"padded", i.padded},
                          {"ms", i.ms > 0 ? Json(i.ms) : Json(nullptr)},
                          {"padded_ms", i.padded_ms > 0 ? Json(i.padded_ms) : Json(nullptr)},
                          {"timed_on", i.timed_on.empty() ? Json(nullptr) : Json(i.timed_on)}});
  return Json{{"model", model}, {"dtype", a.dtype}, {"multiple", a.multiple}, {"layers", a.layers},
              {"issues", std::move(issues)}, {"not_timed", a.not_timed}};
}

// --model with a .pt2 package: what it is, and whether it loads on the selected device (the
// checks load_model makes: device type, instruction set, the PyTorch that made it, the LibTorch
// its library needs). False after saying why it does not (exit 2).
bool report_package(const Invocation& inv, const DeviceInfo& device, const ModelFileFacts& f, Json& j) {
  std::string loaded;
  try {
    loaded = load_model_file(inv.report_model, c10::Device(device.torch_device))->describe();
  } catch (const std::exception& e) {
    std::cerr << "accelkit: --model " << inv.report_model << ": " << torch_error_summary(e.what()) << '\n';
    return false;
  }
  const std::string alignment = "not checked: a package's layers are compiled into its library (check the "
                                "model's TorchScript before export)";
  if (inv.json) {
    j["model_file"] = Json{{"path", inv.report_model}, {"format", to_string(f.format)}, {"models", f.models},
                           {"device", f.device}, {"cpu_isa", f.cpu_isa}, {"machine", f.machine},
                           {"torch_version", f.torch_version.empty() ? Json(nullptr) : Json(f.torch_version)},
                           {"loads_on", device.torch_device}, {"alignment", alignment}};
    return true;
  }
  std::string models;
  for (const auto& m : f.models) models += (models.empty() ? "" : ", ") + m;
  std::cout << "\nModel file " << inv.report_model << ":\n  " << loaded
            << " - loads here (device type, instruction set and LibTorch checked)\n  models inside: " << models
            << (f.torch_version.empty() ? "; the PyTorch that made it is not recorded" : "")
            << "\n  dimension alignment: " << alignment << '\n';
  return true;
}

// --model: the model's sizes against the multiples the device's plugin states, for the
// plan's dtype. False after check_alignment refused the model (exit 2).
bool report_alignment(const Invocation& inv, const DeviceInfo& device, const PrecisionPlan& plan,
                      const ReportModel& model, Json& j) {
  // Measured under the plan's threads (applied for that, as --apply would).
  if (inv.measure) at::set_num_threads(std::max(1, plan.threads > 0 ? plan.threads : at::get_num_threads()));
  AlignmentReport a;
  try {
    a = check_alignment(*model.module, device, to_string(plan.dtype),
                        inv.measure && device.torch_device == "cpu", model.inputs);
  } catch (const std::invalid_argument& e) {
    std::cerr << "accelkit: --model " << inv.report_model << ": " << e.what() << '\n';
    return false;
  }
  if (inv.json) j["alignment"] = alignment_json(inv.report_model, a);
  else std::cout << "\nDimension alignment of " << inv.report_model << ":\n  " << a.summary();
  return true;
}

// The AdamW implementation (adamw_choice.hpp): the cached measurement at the plan's threads;
// with `measure` (--apply: the plan's threads in force) measured now when there is none.
void report_adamw(const Invocation& inv, const Context& ctx, const Result<std::shared_ptr<Optimizer>>& optimizers,
                  int threads, bool measure, Json& j) {
  const Decision& d = ctx.decision();
  if (!optimizers.ok() || !optimizers.value()) {
    const std::string why = optimizers.ok() ? "none" : optimizers.status().message();
    if (inv.json) j["adamw"] = Json{{"implementation", nullptr}, {"why", why}};
    else std::cout << "\nAdamW: the plugin has no optimizer (" << why << "); torch::optim::AdamW\n";
    return;
  }
  AdamWImplChoice c = cached_adamw_implementation(ctx, *optimizers.value(), threads);
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
    std::cout << "  not measured yet for " << threads << " threads (the first make_adamw, e.g. accelkit "
              << "bench, measures it; 'accelkit report --apply' measures it now)\n";
  else
    std::cout << "  " << c.name << ": " << c.description << "\n  why: " << c.why
              << (c.cache_file.empty() ? "" : "\n  cache: " + c.cache_file) << '\n';
}

// Each value read back, against what the plan intended for it.
std::vector<AppliedRow> applied_rows(const std::vector<AppliedValue>& read, const PrecisionPlan& plan) {
  std::vector<AppliedRow> rows;
  for (const auto& v : read) {
    AppliedRow row{v.key, v.value, conformance::intended_value(v, plan), std::nullopt};
    if (row.intended) row.match = conformance::same_value(*row.intended, v.value);
    rows.push_back(std::move(row));
  }
  return rows;
}

// The values read back: into the JSON (printed), or as a table.
void print_applied(const Invocation& inv, const std::vector<AppliedRow>& rows, int mismatches, Json& j) {
  if (inv.json) {
    Json values = Json::array();
    for (const auto& r : rows)
      values.push_back(Json{{"key", r.key},
                            {"value", r.read},
                            {"intended", r.intended ? Json(*r.intended) : Json(nullptr)},
                            {"match", r.match ? Json(*r.match) : Json(nullptr)}});
    j["applied"] = Json{{"values", std::move(values)}, {"mismatches", mismatches}};
    print_json(j);
    return;
  }
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

// --apply: the plan applied to LibTorch (the AdamW choice measured under it), read back and
// compared; exit 1 when a value differs from the plan.
int apply_and_read_back(const Invocation& inv, const Context& ctx, const PlannedDevice& planned,
                        const Result<std::shared_ptr<Optimizer>>& optimizers, Json& j) {
  const Status applied = planned.precision->apply(planned.plan);
  if (!applied.is_ok()) return report_failure(inv, j, "applying the precision plan failed: " + applied.message());
  try {
    report_adamw(inv, ctx, optimizers, planned.plan.threads, true, j);
  } catch (const std::exception& e) {
    return report_failure(inv, j, std::string("measuring the AdamW implementations failed: ") + e.what());
  }
  auto read = planned.precision->read_back();
  if (!read.ok()) return report_failure(inv, j, "reading the applied values back failed: " + read.status().message());

  const std::vector<AppliedRow> rows = applied_rows(read.value(), planned.plan);
  int mismatches = 0;
  for (const auto& r : rows) mismatches += r.match && !*r.match;
  print_applied(inv, rows, mismatches, j);
  if (mismatches) {
    std::cerr << "accelkit: " << mismatches << " applied value" << (mismatches == 1 ? "" : "s")
              << " read back different from the plan\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

int verb_report(const Invocation& inv, Context& ctx) {
  // --model: read before anything is printed, so a bad file is one line.
  ReportModel model;
  if (!inv.report_model.empty() && !load_report_model(inv, model)) return kExitUsage;
  const Decision& d = ctx.decision();
  Json j;
  report_negotiation(inv, ctx, j);
  if (!d.ok) {
    if (inv.json) print_json(j);
    std::cout << std::flush;
    return report_device_failure(ctx);
  }

  std::string error;
  const std::optional<PlannedDevice> planned = open_and_plan(ctx, error);
  if (!planned) return report_failure(inv, j, error);
  if (inv.json) {
    j["precision"] = Json{{"device", d.selected->device.id}, {"request", request_json(planned->request)},
                          {"plan", plan_json(planned->plan)}};
  } else {
    render_plan(std::cout, planned->request, planned->plan);
  }
  report_data_pipeline(inv, ctx, j);
  report_data_parallel(inv, ctx, d.selected->device, j);
  report_memory(inv, *planned->device, j);
  // A device type LibTorch does not know: registered now (as a program's Runtime::start would).
  if (new_device::declares(d.selected->device)) {
    std::string torch_device;
    try {
      torch_device = new_device::activate(d.selected->plugin, *planned->device);
    } catch (const std::exception& e) {
      return report_failure(inv, j, e.what());
    }
    report_new_device(inv, *d.selected, torch_device, j);
  }
  if (model.module && !report_alignment(inv, d.selected->device, planned->plan, model, j)) return kExitUsage;
  if (model.package && !report_package(inv, d.selected->device, *model.package, j)) return kExitUsage;

  auto optimizers = planned->device->optimizer();
  if (inv.apply) return apply_and_read_back(inv, ctx, *planned, optimizers, j);
  report_adamw(inv, ctx, optimizers, planned->plan.threads, false, j);
  if (inv.json) print_json(j);
  else std::cout << "\n(run 'accelkit report --apply' to apply the plan and read it back from LibTorch)\n";
  return kExitOk;
}

}  // namespace accelkit::cli
