#include "render.hpp"

#include <algorithm>

#include "format.hpp"
#include "json_out.hpp"
#include "table.hpp"

namespace accelkit::cli {

void render_selected(std::ostream& out, const Decision& d) {
  if (d.selected) {
    const Candidate& s = *d.selected;
    out << "Selected: " << s.device.id << "  " << s.device.name << "  (plugin " << s.plugin
        << ", torch device " << or_dash(s.device.torch_device) << ")\n";
  } else {
    out << "Selected: none" << (d.explicit_request ? " (the requested device is unavailable)" : "") << '\n';
  }
}

void render_candidates(std::ostream& out, const Decision& d) {
  out << "Candidates (best first):\n";
  if (d.candidates.empty()) {
    out << "  none\n";
  } else {
    Table t({"", "DEVICE", "PLUGIN", "KIND", "SCORE", "REASON"});
    t.right_align(4);
    for (const auto& c : d.candidates) {
      const bool chosen = d.selected && d.selected->device.id == c.device.id && d.selected->plugin == c.plugin;
      t.add_row({chosen ? "*" : (c.eligible ? "" : "x"), c.device.id, c.plugin, to_string(c.device.kind),
                 std::to_string(c.score), c.reason});
    }
    t.print(out);
    out << "  (* selected, x not eligible)\n";
  }
  for (const auto& r : d.reasons) out << "  - " << r << '\n';
  for (const auto& h : d.hints) out << "  hint: " << h << '\n';
}

void render_plugins(std::ostream& out, const std::vector<PluginRecord>& plugins, bool verbose) {
  out << "Plugins (" << plugins.size() << " found):\n";
  if (plugins.empty()) {
    out << "  none: no plugin in the search path ('accelkit plugins -v' shows it)\n";
    return;
  }
  Table t({"NAME", "STATUS", "VERSION", "SCORE", "DEVICES", "PATH"});
  t.right_align(3).right_align(4);
  for (const auto& p : plugins) {
    t.add_row({p.name, to_string(p.status), or_dash(p.version),
               p.probe ? std::to_string(p.probe->score) : "-",
               p.probe ? std::to_string(p.probe->devices.size()) : "-", p.path});
    if (!p.reason.empty()) t.add_note("reason: " + p.reason);
    // A plugin loaded although its scan failed (the cpu plugin after a timeout) says so always.
    if ((verbose || p.scan.rfind("failed", 0) == 0) && !p.scan.empty() && p.status != PluginStatus::rejected)
      t.add_note("scan: " + p.scan);
    if (!p.probe) continue;
    if (verbose || p.status != PluginStatus::usable)
      for (const auto& r : p.probe->reasons)
        if (r != p.reason) t.add_note("probe: " + r);
    for (const auto& w : p.probe->warnings) t.add_note("warning: " + w);
    if (verbose)
      for (const auto& dev : p.probe->devices) t.add_note("device " + dev.id + ": " + dev.name);
  }
  t.print(out);
}

void render_devices(std::ostream& out, const std::vector<PluginRecord>& plugins) {
  out << "Devices:\n";
  bool any = false;
  for (const auto& p : plugins) {
    if (!p.probe) continue;
    for (const auto& d : p.probe->devices) {
      any = true;
      out << "  " << d.id << "  " << d.name << '\n';
      Table t({"", ""}, "    ");
      t.hide_header();
      t.add_row({"vendor", or_dash(d.vendor)});
      t.add_row({"kind", to_string(d.kind)});
      t.add_row({"memory", human_bytes(d.memory_bytes)});
      t.add_row({"torch device", d.torch_device.empty() ? "- (LibTorch here cannot drive it)" : d.torch_device});
      t.add_row({"capabilities", or_dash(join(capability_names(d.capabilities), " "))});
      for (const auto& [k, v] : d.properties)
        if (k != "vendor" && k != "kind" && k != "memory") t.add_row({k, v});  // shown above
      t.print(out);
      for (const auto& w : d.warnings) out << "    warning: " << w << '\n';
    }
  }
  if (!any) out << "  none\n";
}

// LibTorch's device types among the plugins' devices ("cuda" of "cuda:0"), and the plugins
// serving each, vendor plugins first: the device-generic torch plugin serves a type "alone" or
// "also, ranked below" a vendor plugin, with what such a device lacks.
void render_device_types(std::ostream& out, const std::vector<PluginRecord>& plugins) {
  std::vector<std::pair<std::string, std::vector<std::string>>> types;  // in the order first seen
  for (const auto& p : plugins) {
    if (!p.probe || p.status != PluginStatus::usable) continue;
    for (const auto& d : p.probe->devices) {
      if (d.torch_device.empty()) continue;
      const std::string type = d.torch_device.substr(0, d.torch_device.find(':'));
      auto it = std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.first == type; });
      if (it == types.end()) it = types.insert(types.end(), {type, {}});
      if (std::find(it->second.begin(), it->second.end(), p.name) == it->second.end()) it->second.push_back(p.name);
    }
  }
  out << "Device types (LibTorch's, and the plugin serving each):\n";
  if (types.empty()) {
    out << "  none\n";
    return;
  }
  Table t({"TYPE", "SERVED BY"});
  t.hide_header();
  for (auto& [type, names] : types) {
    const auto generic = std::find(names.begin(), names.end(), std::string(kGenericPlugin));
    const bool has_generic = generic != names.end();
    if (has_generic) names.erase(generic);
    std::string text = join(names, ", ");
    if (has_generic && names.empty())
      text = std::string(kGenericPlugin) +
             " alone (device-generic, LibTorch's at::accelerator: no vendor sensors, precision rules or kernels)";
    else if (has_generic)
      text += "; also " + std::string(kGenericPlugin) + " (device-generic), ranked below";
    t.add_row({type, text});
  }
  t.print(out);
}

void render_settings(std::ostream& out, const Settings& s) {
  out << "Settings";
  if (s.config_file()) out << " (config file " << *s.config_file() << ")";
  out << ":\n";
  Table t({"KEY", "VALUE", "ORIGIN", "SOURCE", "WHY"});
  for (const auto& [key, e] : s.all())
    t.add_row({key, format_value(e.value), to_string(e.origin), or_dash(e.source), e.why});
  t.print(out);
}

void render_decisions(std::ostream& out, const std::vector<RuntimeDecision>& decisions) {
  if (decisions.empty()) return;
  out << "Decided at run time, beside the settings (which stay as resolved):\n";
  Table t({"KEY", "USED", "SOURCE", "WHY"});
  for (const auto& d : decisions) t.add_row({d.key, d.value, d.source, d.why});
  t.print(out);
}

}  // namespace accelkit::cli
