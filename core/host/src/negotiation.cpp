#include "accelkit/negotiation.hpp"

#include "accelkit/new_device.hpp"

#include <algorithm>
#include <climits>
#include <tuple>
#include <utility>

namespace accelkit {

namespace {

std::string describe(const Candidate& c) {
  std::string s = c.device.id;
  if (!c.device.name.empty()) s += " (" + c.device.name + ")";
  return s;
}

// "a discrete GPU", "an NPU", ...
std::string a_kind(DeviceKind k) {
  const std::string what = describe(k);
  const bool vowel = what[0] == 'i' || what[0] == 'o' || what[0] == 'N';
  return (vowel ? "an " : "a ") + what;
}

constexpr const char* kAutoOrder = "discrete GPU > integrated GPU > NPU > other > CPU";

}  // namespace

int kind_rank(DeviceKind k) noexcept {
  switch (k) {
    case DeviceKind::discrete_gpu: return 0;
    case DeviceKind::integrated_gpu: return 1;
    case DeviceKind::npu: return 2;
    case DeviceKind::other: return 3;
    case DeviceKind::cpu: return 4;
  }
  return 3;
}

namespace {

// The request, parsed once.
struct Ask {
  const DeviceRequest& request;
  bool auto_device;
  bool want_index;          // "<plugin>:<index>"
  std::string want_plugin;  // "" for auto
  std::string origin;       // " (from --device)", or ""

  explicit Ask(const DeviceRequest& r)
      : request(r),
        auto_device(r.device.automatic()),
        want_index(r.device.index.has_value()),
        want_plugin(r.device.plugin),
        origin(r.device_origin.empty() ? "" : " (from " + r.device_origin + ")") {}

  // Position in `prefer`; INT_MAX when not listed.
  int prefer_rank(const std::string& plugin) const {
    auto it = std::find(request.prefer.begin(), request.prefer.end(), plugin);
    return it == request.prefer.end() ? INT_MAX : static_cast<int>(it - request.prefer.begin());
  }
};

// Why `c` cannot be chosen, with the sentence for people; none when it can.
std::pair<Exclusion, std::string> exclusion(const PluginRecord& rec, const Candidate& c, const Ask& ask) {
  const DeviceRequest& request = ask.request;
  if (rec.status != PluginStatus::usable)
    return {Exclusion::plugin_unusable, "plugin " + std::string(to_string(rec.status)) + ": " + rec.reason};
  if (c.device.torch_device.empty())
    return {Exclusion::no_torch_device, "LibTorch in this process cannot drive it"};
  if (request.no_gpu && c.device.kind != DeviceKind::cpu) return {Exclusion::no_gpu, "excluded by --no-gpu"};
  if (!ask.auto_device && (ask.want_index ? c.device.id != request.device.str() : c.plugin != ask.want_plugin))
    return {Exclusion::not_requested, "not the requested device '" + request.device.str() + "'" + ask.origin};
  if (new_device::declares(c.device)) {
    const new_device::State active = new_device::state();
    if (active.active && active.plugin != c.plugin)
      return {Exclusion::new_device_taken, "a new device type, and this process already runs " + active.plugin +
                                               "'s (LibTorch has one PrivateUse1 backend per process)"};
  }
  if (ask.auto_device && c.device.capabilities.has(Capability::reference_device))
    return {Exclusion::reference_only, "a reference device: auto never picks it; --device " + c.plugin + " does"};
  for (const auto& cap : request.require)
    if (!c.device.capabilities.has(cap))
      return {Exclusion::missing_capability, "lacks required capability '" + cap + "'"};
  return {Exclusion::none, ""};
}

// Every device of every probed plugin as a candidate; one reason line per plugin without any.
void collect_candidates(const std::vector<PluginRecord>& plugins, const Ask& ask, Decision& d) {
  for (const auto& rec : plugins) {
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
      std::tie(c.excluded, c.reason) = exclusion(rec, c, ask);
      c.eligible = c.excluded == Exclusion::none;
      d.candidates.push_back(std::move(c));
    }
  }
}

// Eligible first, then `prefer`, then the declared kind, then score.
void rank_candidates(const Ask& ask, std::vector<Candidate>& candidates) {
  auto key = [&](const Candidate& c) {
    return std::make_tuple(!c.eligible, ask.prefer_rank(c.plugin), kind_rank(c.device.kind), -c.score, c.plugin,
                           c.device_index);
  };
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const Candidate& a, const Candidate& b) { return key(a) < key(b); });
}

// The winner's reason, and for every other eligible candidate why it ranks lower.
void explain_choice(const Ask& ask, std::vector<Candidate>& ranked) {
  const DeviceRequest& request = ask.request;
  Candidate& best = ranked.front();
  if (!ask.auto_device) {
    best.reason = "chosen: requested as '" + request.device.str() + "'" + ask.origin;
  } else if (ask.prefer_rank(best.plugin) != INT_MAX) {
    best.reason = "chosen: '" + best.plugin + "' is preferred by the configuration";
  } else {
    best.reason = "chosen: " + a_kind(best.device.kind) + " ranks highest of those available (auto order: " +
                  kAutoOrder + ", as each plugin declares its devices; then score " + std::to_string(best.score) + ")";
  }
  if (request.no_gpu) best.reason += "; --no-gpu";
  if (!request.require.empty()) {
    std::string req;
    for (const auto& r : request.require) req += (req.empty() ? "" : ", ") + r;
    best.reason += "; has every required capability (" + req + ")";
  }
  for (std::size_t i = 1; i < ranked.size() && ranked[i].eligible; ++i) {
    Candidate& c = ranked[i];
    if (ask.prefer_rank(c.plugin) != ask.prefer_rank(best.plugin))
      c.reason = "eligible; less preferred by the configuration";
    else if (kind_rank(c.device.kind) != kind_rank(best.device.kind))
      c.reason = "eligible; " + a_kind(c.device.kind) + " ranks below " + a_kind(best.device.kind);
    else if (c.score != best.score)
      c.reason = "eligible; lower score (" + std::to_string(c.score) + " < " + std::to_string(best.score) + ")";
    else
      c.reason = "eligible; ranked after " + best.device.id;
  }
}

// A data-parallel rank's device: the LOCAL_RANK-th (mod their count) of the winning plugin's
// eligible devices, moved to the front. Returns the note for the winner's reason ("" when
// nothing was moved or there is nothing to choose between).
std::string pick_local_device(const Ask& ask, std::vector<Candidate>& ranked) {
  if (ask.request.local_rank < 0 || ask.want_index) return "";
  const std::string plugin = ranked.front().plugin;
  std::vector<std::size_t> same;  // positions in `ranked`, by device index
  for (std::size_t i = 0; i < ranked.size(); ++i)
    if (ranked[i].eligible && ranked[i].plugin == plugin) same.push_back(i);
  if (same.size() < 2) return "";
  std::sort(same.begin(), same.end(),
            [&](std::size_t a, std::size_t b) { return ranked[a].device_index < ranked[b].device_index; });
  const std::size_t pick = same[static_cast<std::size_t>(ask.request.local_rank) % same.size()];
  std::rotate(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(pick),
              ranked.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
  return "; LOCAL_RANK=" + std::to_string(ask.request.local_rank) + " takes " + ranked.front().device.id + " of " +
         std::to_string(same.size()) + " " + plugin + " devices";
}

// What was asked, what is usable and why the rest is not: the error of a failed negotiation.
std::string refusal(const std::vector<PluginRecord>& plugins, const Ask& ask, const Decision& d) {
  const DeviceRequest& request = ask.request;
  std::string what = ask.auto_device ? std::string("any device") : "device '" + request.device.str() + "'" + ask.origin;
  if (request.no_gpu) what += " with --no-gpu";
  if (!request.require.empty()) {
    what += " with capabilities [";
    for (std::size_t i = 0; i < request.require.size(); ++i) what += (i ? ", " : "") + request.require[i];
    what += "]";
  }
  std::string err = "requested " + what + " is not available.";
  const bool seen = std::any_of(plugins.begin(), plugins.end(),
                                [&](const PluginRecord& r) { return r.name == ask.want_plugin; });
  if (!ask.auto_device && !seen) err += " No plugin named '" + ask.want_plugin + "' was found.";
  auto unusable = [](const Candidate& c) {
    return c.excluded == Exclusion::plugin_unusable || c.excluded == Exclusion::no_torch_device;
  };
  std::string usable, rest;
  for (const auto& c : d.candidates) (unusable(c) ? rest : usable) += "\n  " + describe(c) + ": " + c.reason;
  err += usable.empty() ? "\nNo usable device at all." : "\nUsable devices (not matching the request):" + usable;
  for (const auto& r : d.reasons) rest += "\n  " + r;
  if (!rest.empty()) err += "\nNot usable:" + rest;
  return err;
}

// GPUs on the PCI bus that no usable plugin serves: which package to install, or why the
// plugin that would serve them cannot.
std::vector<std::string> pci_hints(const std::vector<PluginRecord>& plugins, const std::vector<PciGpu>& pci) {
  std::vector<std::string> hints;
  for (const auto& gpu : pci) {
    const std::string plugin = gpu.vendor == 0x10de ? "cuda" : "rocm";
    const std::string vendor = gpu.vendor == 0x10de ? "NVIDIA" : "AMD";
    auto it = std::find_if(plugins.begin(), plugins.end(), [&](const PluginRecord& r) { return r.name == plugin; });
    if (it != plugins.end() && it->status == PluginStatus::usable) continue;
    std::string hint = vendor + " GPU on the PCI bus at " + gpu.address + ", but ";
    if (it == plugins.end())
      hint += "no " + plugin + " plugin was found: install the accelkit-plugin-" + plugin +
              " package (or add its directory to ACCELKIT_ADD_PLUGIN_PATH)";
    else
      hint += "the " + plugin + " plugin is " + to_string(it->status) + ": " + it->reason;
    hints.push_back(std::move(hint));
  }
  return hints;
}

}  // namespace

Decision negotiate(const std::vector<PluginRecord>& plugins, const DeviceRequest& request,
                   const std::vector<PciGpu>& pci) {
  const Ask ask(request);
  Decision d;
  d.explicit_request = !ask.auto_device || request.no_gpu || !request.require.empty();
  collect_candidates(plugins, ask, d);
  rank_candidates(ask, d.candidates);
  if (!d.candidates.empty() && d.candidates.front().eligible) {
    const std::string local = pick_local_device(ask, d.candidates);
    explain_choice(ask, d.candidates);
    d.candidates.front().reason += local;
    d.selected = d.candidates.front();
    d.ok = true;
  } else {
    d.error = refusal(plugins, ask, d);
  }
  d.hints = pci_hints(plugins, pci);
  return d;
}

}  // namespace accelkit
