#include "accelkit/context.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "accelkit/launch.hpp"
#include "accelkit/log.hpp"
#include "accelkit/new_device.hpp"

namespace accelkit {
namespace {

const PluginRecord* find_plugin(const Discovery& d, const std::string& name) {
  for (const auto& rec : d.plugins)
    if (rec.name == name) return &rec;
  return nullptr;
}

// extension_devices: each named plugin's new device type registered with LibTorch
// (new_device::activate), as a vendor's LibTorch extension registers its own - so that the
// device-generic torch plugin finds it through at::accelerator. A plugin that is missing,
// unusable or declares no new device type is a SettingsError naming the setting; one whose
// device cannot be opened or registered, a DeviceUnavailableError.
void register_extensions(const Discovery& d, const Setting<std::vector<std::string>>& setting) {
  // LibTorch keeps a registration for the life of the process: so do the devices behind it.
  static std::vector<std::shared_ptr<Device>> kept;
  for (const auto& name : *setting) {
    const std::string who = "extension_devices (from " + setting.from() + "): plugin '" + name + "'";
    const PluginRecord* rec = find_plugin(d, name);
    if (!rec) throw SettingsError(who + " was not found (accelkit plugins lists what was)");
    if (rec->status != PluginStatus::usable || !rec->plugin || !rec->probe)
      throw SettingsError(who + " is not usable: " + rec->reason);
    const auto& devices = rec->probe->devices;
    const auto it = std::find_if(devices.begin(), devices.end(), [](const DeviceInfo& i) { return new_device::declares(i); });
    if (it == devices.end()) throw SettingsError(who + " declares no new device type (privateuseone:<index>)");
    Result<std::shared_ptr<Device>> dev = rec->plugin->open(static_cast<std::size_t>(it - devices.begin()));
    if (!dev.ok() || !dev.value())
      throw DeviceUnavailableError(who + ": cannot open " + it->id + ": " +
                                   (dev.ok() ? std::string("the plugin returned no device") : dev.status().message()));
    const std::string torch_name = new_device::activate(name, *dev.value());
    spdlog::info("extension_devices: {} registered with LibTorch as {} (served by the device-generic plugin)", it->id,
                 torch_name);
    auto holder = std::make_shared<std::pair<std::shared_ptr<Plugin>, std::shared_ptr<Device>>>(rec->plugin, dev.value());
    kept.push_back(std::shared_ptr<Device>(holder, holder->second.get()));
  }
}

// Their devices are offered through the device-generic plugin only.
void mark_extensions(Discovery& d, const std::vector<std::string>& names) {
  for (auto& rec : d.plugins)
    if (std::find(names.begin(), names.end(), rec.name) != names.end() && rec.status == PluginStatus::usable) {
      rec.status = PluginStatus::unavailable;
      rec.reason = "registered with LibTorch as an extension (extension_devices): its device is served by the "
                   "device-generic torch plugin";
    }
}

}  // namespace

PrecisionRequest precision_request_from(const Config& c) {
  PrecisionRequest request;
  request.precision = *c.precision;
  request.tf32 = *c.tf32;
  request.threads = *c.threads;
  request.blas = *c.blas_kernels;
  request.kernels = *c.kernels;
  return request;
}

DeviceRequest device_request_from(const Config& c) {
  DeviceRequest r;
  r.device = *c.device;
  r.device_origin = c.device.from();
  r.no_gpu = *c.no_gpu;
  r.prefer = *c.prefer;
  r.require = *c.require;
  return r;
}

void Context::record(RuntimeDecision decision) {
  auto same = std::find_if(decisions_.begin(), decisions_.end(),
                           [&](const RuntimeDecision& d) { return d.key == decision.key; });
  if (same != decisions_.end()) decisions_.erase(same);
  decisions_.push_back(std::move(decision));
}

std::unique_ptr<Context> Context::create(const ContextOptions& options) {
  return create(Settings::resolve(options.settings), options.loader);
}

std::unique_ptr<Context> Context::create(Settings settings, const LoaderOptions& loader) {
  std::unique_ptr<Context> ctx(new Context());
  ctx->settings_ = std::move(settings);
  init_logging(*ctx->config().log_level);
  LoaderOptions scan = loader;
  const Config& c = ctx->config();
  scan.scan = loader.scan && *c.plugin_scan;
  scan.scan_timeout_s = *c.plugin_scan_timeout;
  scan.scan_memory_bytes = static_cast<std::uint64_t>(*c.plugin_scan_memory) << 20;
  ctx->discovery_ = discover_plugins(scan);
  if (!c.extension_devices->empty()) {
    register_extensions(ctx->discovery_, c.extension_devices);
    ctx->discovery_ = discover_plugins(scan);  // probed again: the registered type is LibTorch's accelerator now
    mark_extensions(ctx->discovery_, *c.extension_devices);
  }
  std::vector<std::string> pci_problems;
  ctx->pci_ = scan_pci_gpus(&pci_problems);
  for (const auto& p : pci_problems) spdlog::warn("PCI scan: {}", p);
  DeviceRequest request = device_request_from(ctx->config());
  try {  // under a data-parallel launcher, this rank's device (dist::init reports a bad launch)
    if (const dist::Launch l = dist::detect_launch(); l.world_size > 1) request.local_rank = l.local_rank;
  } catch (const dist::LaunchError&) {
  }
  ctx->decision_ = negotiate(ctx->discovery_.plugins, request, ctx->pci_);
  for (const auto& hint : ctx->decision_.hints) spdlog::info("{}", hint);
  return ctx;
}

const Candidate& Context::require_device() const {
  if (decision_.ok && decision_.selected) return *decision_.selected;
  std::string err = decision_.error;
  // No plugin file at all: say where the loader looked (an application built against an
  // installed accelkit elsewhere than its build-time prefix has to name the directory).
  if (discovery_.plugins.empty()) {
    err += "\nNo plugin file was found. Searched:";
    for (const auto& d : discovery_.dirs) err += "\n  " + d.path + " (" + d.origin + ")";
    if (discovery_.dirs.empty()) err += " nothing (no search directory)";
    err += "\nSet ACCELKIT_ADD_PLUGIN_PATH to the directory holding libaccelkit-*.so (<prefix>/<libdir>/accelkit/plugins).";
  }
  throw DeviceUnavailableError(err);
}

const PluginRecord* Context::plugin(const std::string& name) const {
  for (const auto& rec : discovery_.plugins)
    if (rec.name == name && rec.plugin) return &rec;
  return nullptr;
}

std::shared_ptr<Device> Context::open_selected() const { return open(require_device()); }

std::shared_ptr<Device> Context::open(const Candidate& c) const {
  const PluginRecord* rec = plugin(c.plugin);
  if (!rec || !rec->plugin) throw std::runtime_error("plugin '" + c.plugin + "' is not loaded");
  Result<std::shared_ptr<Device>> dev = rec->plugin->open(c.device_index);
  if (!dev.ok()) throw std::runtime_error("cannot open " + c.device.id + ": " + dev.status().message());
  if (!dev.value()) throw std::runtime_error("cannot open " + c.device.id + ": the plugin returned no device");
  // The device shares ownership of its plugin, so the plugin outlives every device.
  auto holder = std::make_shared<std::pair<std::shared_ptr<Plugin>, std::shared_ptr<Device>>>(rec->plugin, dev.value());
  return std::shared_ptr<Device>(holder, holder->second.get());
}

}  // namespace accelkit
