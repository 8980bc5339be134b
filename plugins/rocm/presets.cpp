#include "presets.hpp"

#include <cmath>
#include <sstream>

#include <toml++/toml.h>

#include "presets_data.hpp"  // generated: kPresetsToml

namespace accelkit::rocm {
namespace {

std::string where(const std::string& source, const toml::source_region& r) {
  return source + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

std::optional<std::int64_t> positive(const toml::table& t, const char* key, const std::string& source) {
  const toml::node* n = t.get(key);
  if (!n) return std::nullopt;
  const auto* i = n->as_integer();
  if (!i || i->get() < 1)
    throw PresetError(where(source, n->source()) + ": '" + key + "' must be a positive integer");
  return i->get();
}

void check_keys(const toml::table& t, std::initializer_list<const char*> allowed, const std::string& source) {
  for (auto&& [k, n] : t) {
    bool ok = false;
    for (const char* a : allowed) ok |= k.str() == a;
    if (!ok) throw PresetError(where(source, k.source()) + ": unknown key '" + std::string(k.str()) + "'");
  }
}

bool gfx_matches(const std::string& pattern, const std::string& gfx) {
  if (pattern.empty() || gfx.empty()) return false;
  if (pattern.back() == '*') return gfx.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == gfx;
}

}  // namespace

std::string_view builtin_presets_text() { return kPresetsToml; }

PresetTable parse_presets(std::string_view toml_text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    throw PresetError(where(source, e.source()) + ": invalid TOML: " + std::string(e.description()));
  }
  check_keys(root, {"class", "device"}, source);
  PresetTable out;
  auto tables = [&](const char* key) {
    std::vector<const toml::table*> v;
    if (const toml::node* n = root.get(key)) {
      const auto* arr = n->as_array();
      if (!arr) throw PresetError(where(source, n->source()) + ": '" + key + "' must be an array of tables ([[" + key + "]])");
      for (const auto& e : *arr) {
        if (!e.as_table()) throw PresetError(where(source, e.source()) + ": '" + key + "' entries must be tables");
        v.push_back(e.as_table());
      }
    }
    return v;
  };
  for (const toml::table* t : tables("class")) {
    check_keys(*t, {"name", "max_vram_gib", "batch_size", "grad_accumulation", "model_width"}, source);
    PresetClass c;
    c.name = t->get("name") && t->get("name")->as_string() ? t->get("name")->as_string()->get() : "";
    if (c.name.empty()) throw PresetError(where(source, t->source()) + ": a [[class]] needs a name");
    if (const toml::node* m = t->get("max_vram_gib")) {
      auto v = m->value<double>();
      if (!v || !std::isfinite(*v) || *v <= 0)
        throw PresetError(where(source, m->source()) + ": 'max_vram_gib' must be a positive number");
      c.max_vram_gib = *v;
    }
    auto b = positive(*t, "batch_size", source), g = positive(*t, "grad_accumulation", source),
         w = positive(*t, "model_width", source);
    if (!b || !w) throw PresetError(where(source, t->source()) + ": class '" + c.name + "' needs batch_size and model_width");
    c.batch_size = *b;
    c.grad_accumulation = g.value_or(1);
    c.model_width = *w;
    if (!out.classes.empty() && (!out.classes.back().max_vram_gib ||
                                 (c.max_vram_gib && *c.max_vram_gib <= *out.classes.back().max_vram_gib)))
      throw PresetError(where(source, t->source()) + ": classes must be in increasing max_vram_gib order");
    out.classes.push_back(std::move(c));
  }
  for (const toml::table* t : tables("device")) {
    check_keys(*t, {"name", "pci_device_id", "gfx", "batch_size", "grad_accumulation", "model_width"}, source);
    PresetDevice d;
    if (auto n = t->get("name"); n && n->as_string()) d.name = n->as_string()->get();
    if (auto n = t->get("gfx"); n && n->as_string()) d.gfx = n->as_string()->get();
    if (auto id = positive(*t, "pci_device_id", source)) d.pci_device_id = static_cast<std::uint32_t>(*id);
    if (d.gfx.empty() && !d.pci_device_id)
      throw PresetError(where(source, t->source()) + ": a [[device]] needs pci_device_id or gfx");
    d.batch_size = positive(*t, "batch_size", source);
    d.grad_accumulation = positive(*t, "grad_accumulation", source);
    d.model_width = positive(*t, "model_width", source);
    out.devices.push_back(std::move(d));
  }
  return out;
}

std::optional<Preset> select_preset(const PresetTable& table, std::uint64_t vram_bytes,
                                    std::uint32_t pci_device_id, const std::string& gfx) {
  const double gib = static_cast<double>(vram_bytes) / (1024.0 * 1024.0 * 1024.0);
  const PresetClass* cls = nullptr;
  for (const auto& c : table.classes)
    if (!c.max_vram_gib || gib <= *c.max_vram_gib) {
      cls = &c;
      break;
    }
  if (!cls) return std::nullopt;
  Preset p{cls->name, cls->batch_size, cls->grad_accumulation, cls->model_width, ""};
  std::ostringstream why;
  why.precision(3);
  why << gib << " GiB VRAM -> class " << cls->name;
  // A specific card first, then an architecture entry.
  const PresetDevice* dev = nullptr;
  for (const auto& d : table.devices)
    if (d.pci_device_id && *d.pci_device_id == pci_device_id) {
      dev = &d;
      break;
    }
  if (!dev)
    for (const auto& d : table.devices)
      if (!d.pci_device_id && gfx_matches(d.gfx, gfx)) {
        dev = &d;
        break;
      }
  if (dev) {
    p.batch_size = dev->batch_size.value_or(p.batch_size);
    p.grad_accumulation = dev->grad_accumulation.value_or(p.grad_accumulation);
    p.model_width = dev->model_width.value_or(p.model_width);
    std::string label = !dev->name.empty() ? dev->name : dev->gfx;
    p.name += " + " + label;
    why << "; device entry " << label;
  }
  p.why = why.str();
  return p;
}

}  // namespace accelkit::rocm
