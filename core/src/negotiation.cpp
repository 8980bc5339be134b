#include "accelkit/negotiation.hpp"

#include <algorithm>
#include <climits>
#include <tuple>

namespace accelkit {

namespace {

int kind_rank(DeviceKind k) {
  switch (k) {
    case DeviceKind::discrete_gpu: return 0;
    case DeviceKind::integrated_gpu: return 1;
    case DeviceKind::other: return 2;
    case DeviceKind::cpu: return 3;
  }
  return 3;
}

const char* family_label(int rank) {
  static const char* labels[] = {"cuda", "rocm", "mps", "other GPU", "cpu", "other"};
  return labels[std::clamp(rank, 0, 5)];
}

std::string describe(const Candidate& c) {
  std::string s = c.device.id;
  if (!c.device.name.empty()) s += " (" + c.device.name + ")";
  return s;
}

}  // namespace

int family_rank(const std::string& plugin, DeviceKind kind) noexcept {
  if (plugin == "cuda") return 0;
  if (plugin == "rocm") return 1;
  if (plugin == "mps") return 2;
  if (kind == DeviceKind::discrete_gpu || kind == DeviceKind::integrated_gpu) return 3;
  if (kind == DeviceKind::cpu || plugin == "cpu") return 4;
  return 5;
}

Decision negotiate(const std::vector<PluginRecord>& plugins, const DeviceRequest& request,
                   const std::vector<PciGpu>& pci) {
  Decision d;
  const std::string& want = request.device;
  const bool auto_device = want.empty() || want == "auto";
  const bool want_index = !auto_device && want.find(':') != std::string::npos;
  const std::string want_plugin = auto_device ? "" : want.substr(0, want.find(':'));
  d.explicit_request = !auto_device || request.no_gpu || !request.require.empty();
  const std::string origin = request.device_origin.empty() ? "" : " (from " + request.device_origin + ")";

  auto prefer_rank = [&](const std::string& name) {
    auto it = std::find(request.prefer.begin(), request.prefer.end(), name);
    return it == request.prefer.end() ? INT_MAX : static_cast<int>(it - request.prefer.begin());
  };

  bool requested_plugin_seen = false;
  for (const auto& rec : plugins) {
    if (rec.name == want_plugin) requested_plugin_seen = true;
    if (!rec.probe) {
      d.reasons.push_back(rec.name + ": " + to_string(rec.status) + " - " + rec.reason);
      continue;
    }
    if (rec.probe->devices.empty()) {
      d.reasons.push_back(rec.name + ": no devices" + (rec.reason.empty() ? "" : " - " + rec.reason));
      continue;
    }
    for (std::size_t i = 0; i < rec.probe->devices.size(); ++i) {
      Candidate c;
      c.plugin = rec.name;
      c.device = rec.probe->devices[i];
      c.device_index = i;
      c.score = rec.probe->score;
      std::string why;
      if (rec.status != PluginStatus::loaded) {
        why = "plugin " + std::string(to_string(rec.status)) + ": " + rec.reason;
      } else if (c.device.torch_device.empty()) {
        why = "LibTorch in this process cannot drive it";
      } else if (request.no_gpu && c.device.kind != DeviceKind::cpu) {
        why = "excluded by --no-gpu";
      } else if (!auto_device && (want_index ? c.device.id != want : c.plugin != want_plugin)) {
        why = "not the requested device '" + want + "'" + origin;
      } else {
        for (const auto& cap : request.require)
          if (!c.device.capabilities.has(cap)) {
            why = "lacks required capability '" + cap + "'";
            break;
          }
      }
      c.eligible = why.empty();
      c.reason = why;
      d.candidates.push_back(std::move(c));
    }
  }

  auto key = [&](const Candidate& c) {
    return std::make_tuple(!c.eligible, prefer_rank(c.plugin), family_rank(c.plugin, c.device.kind),
                           kind_rank(c.device.kind), -c.score, c.plugin, c.device_index);
  };
  std::stable_sort(d.candidates.begin(), d.candidates.end(),
                   [&](const Candidate& a, const Candidate& b) { return key(a) < key(b); });

  if (!d.candidates.empty() && d.candidates.front().eligible) {
    Candidate& best = d.candidates.front();
    const int fam = family_rank(best.plugin, best.device.kind);
    if (!auto_device) {
      best.reason = "chosen: requested as '" + want + "'" + origin;
    } else if (prefer_rank(best.plugin) != INT_MAX) {
      best.reason = "chosen: '" + best.plugin + "' is preferred by the configuration";
    } else {
      best.reason = std::string("chosen: ") + family_label(fam) +
                    " ranks highest of those available (auto order: cuda > rocm > mps > other GPUs > cpu; "
                    "discrete over integrated; then score " + std::to_string(best.score) + ")";
    }
    if (request.no_gpu) best.reason += "; --no-gpu";
    if (!request.require.empty()) {
      std::string req;
      for (const auto& r : request.require) req += (req.empty() ? "" : ", ") + r;
      best.reason += "; has every required capability (" + req + ")";
    }
    for (std::size_t i = 1; i < d.candidates.size() && d.candidates[i].eligible; ++i) {
      Candidate& c = d.candidates[i];
      if (prefer_rank(c.plugin) != prefer_rank(best.plugin)) c.reason = "eligible; less preferred by the configuration";
      else if (family_rank(c.plugin, c.device.kind) != fam) c.reason = std::string("eligible; ") + family_label(family_rank(c.plugin, c.device.kind)) + " ranks below " + family_label(fam);
      else if (kind_rank(c.device.kind) != kind_rank(best.device.kind)) c.reason = std::string("eligible; ") + to_string(c.device.kind) + " ranks below " + to_string(best.device.kind);
      else if (c.score != best.score) c.reason = "eligible; lower score (" + std::to_string(c.score) + " < " + std::to_string(best.score) + ")";
      else c.reason = "eligible; ranked after " + best.device.id;
    }
    d.selected = best;
    d.ok = true;
  } else {
    std::string what = auto_device ? std::string("any device") : "device '" + want + "'" + origin;
    if (request.no_gpu) what += " with --no-gpu";
    if (!request.require.empty()) {
      what += " with capabilities [";
      for (std::size_t i = 0; i < request.require.size(); ++i) what += (i ? ", " : "") + request.require[i];
      what += "]";
    }
    std::string err = "requested " + what + " is not available.";
    if (!auto_device && !requested_plugin_seen) err += " No plugin named '" + want_plugin + "' was found.";
    std::string usable;
    for (const auto& c : d.candidates)
      if (c.reason.rfind("plugin ", 0) != 0 && !c.device.torch_device.empty())
        usable += "\n  " + describe(c) + ": " + c.reason;
    err += usable.empty() ? "\nNo usable device at all." : "\nUsable devices (not matching the request):" + usable;
    std::string rest;
    for (const auto& c : d.candidates)
      if (c.reason.rfind("plugin ", 0) == 0 || c.device.torch_device.empty())
        rest += "\n  " + describe(c) + ": " + c.reason;
    for (const auto& r : d.reasons) rest += "\n  " + r;
    if (!rest.empty()) err += "\nNot usable:" + rest;
    d.error = err;
  }

  for (const auto& gpu : pci) {
    const std::string plugin = gpu.vendor == 0x10de ? "cuda" : "rocm";
    const std::string vendor = gpu.vendor == 0x10de ? "NVIDIA" : "AMD";
    auto it = std::find_if(plugins.begin(), plugins.end(), [&](const PluginRecord& r) { return r.name == plugin; });
    if (it != plugins.end() && it->status == PluginStatus::loaded) continue;
    std::string hint = vendor + " GPU on the PCI bus at " + gpu.address + ", but ";
    if (it == plugins.end())
      hint += "no " + plugin + " plugin was found: install the accelkit-plugin-" + plugin +
              " package (or add its directory to ACCELKIT_ADD_PLUGIN_PATH)";
    else
      hint += "the " + plugin + " plugin is " + to_string(it->status) + ": " + it->reason;
    d.hints.push_back(hint);
  }
  return d;
}

}  // namespace accelkit
