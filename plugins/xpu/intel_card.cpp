#include "intel_card.hpp"

#include <algorithm>
#include <sstream>

#include <accelkit/sdk/host_paths.hpp>

#include "accelkit/sdk/support/host_file.hpp"
#include "sysfs_value.hpp"

namespace accelkit::xpu {
namespace {

// KEY= lines of device/uevent: DRIVER and PCI_SLOT_NAME.
struct Uevent {
  std::string driver;
  std::string slot;
};
Uevent read_uevent(const std::string& device_dir) {
  Uevent u;
  auto file = host::read_file_upto(device_dir + "/uevent", 16384);
  if (!file.ok()) return u;
  std::istringstream in(file.text);
  for (std::string line; std::getline(in, line);) {
    if (host::starts_with(line, "DRIVER=")) u.driver = host::trim(line.substr(7));
    if (host::starts_with(line, "PCI_SLOT_NAME=")) u.slot = host::trim(line.substr(14));
  }
  return u;
}

void note_problem(std::vector<std::string>* problems, const std::string& why) {
  if (problems && !why.empty()) problems->push_back(why);
}

// Tiles, VRAM and frequency files as the xe driver lays them out.
void read_xe_layout(IntelCard& c, std::vector<std::string>* problems) {
  std::uint64_t vram = 0;
  bool any_vram = false;
  for (const std::string& name : host::list_dir(c.device_dir)) {
    if (!host::starts_with(name, "tile") || !host::parse_int(name.substr(4))) continue;
    ++c.tiles;
    const std::string tile = c.device_dir + "/" + name;
    std::string problem;
    if (auto bytes = read_count(tile + "/physical_vram_size_bytes", &problem)) {
      vram += *bytes;
      any_vram = true;
    }
    note_problem(problems, problem);
    if (!c.freq_file.empty()) continue;
    for (const std::string& gt : host::list_dir(tile)) {
      if (!host::starts_with(gt, "gt") || !host::exists(tile + "/" + gt + "/freq0/act_freq")) continue;
      c.freq_file = tile + "/" + gt + "/freq0/act_freq";
      c.freq_max_file = tile + "/" + gt + "/freq0/max_freq";
      break;
    }
  }
  if (any_vram && vram > 0) {
    c.vram_bytes = vram;
    c.vram_source = "xe tile*/physical_vram_size_bytes";
  }
}

// Tiles, VRAM and frequency files as i915 lays them out (VRAM only with the i915 backports).
void read_i915_layout(IntelCard& c, std::vector<std::string>* problems) {
  int gts = 0;
  for (const std::string& name : host::list_dir(c.card_dir + "/gt"))
    if (host::starts_with(name, "gt") && host::parse_int(name.substr(2))) ++gts;
  const LmemReading lmem = read_lmem(c);
  note_problem(problems, lmem.problem);
  if (lmem.total && *lmem.total > 0) {
    c.vram_bytes = lmem.total;
    c.vram_source = lmem.source;
  }
  // On a discrete part each GT is a tile with its own memory; an integrated part's second GT
  // (Meteor Lake's media GT) is not one.
  c.tiles = c.vram_bytes ? gts : std::min(gts, 1);
  if (host::exists(c.card_dir + "/gt_act_freq_mhz")) {
    c.freq_file = c.card_dir + "/gt_act_freq_mhz";
    c.freq_max_file = c.card_dir + "/gt_max_freq_mhz";
  }
}

void read_hwmon(IntelCard& c) {
  for (const std::string& name : host::list_dir(c.device_dir + "/hwmon")) {
    if (!host::starts_with(name, "hwmon")) continue;
    const std::string dir = c.device_dir + "/hwmon/" + name;
    if (host::read_line(dir + "/name").value_or("") != c.driver) continue;
    c.hwmon_dir = dir;
    break;
  }
  if (c.hwmon_dir.empty()) return;
  if (host::exists(c.hwmon_dir + "/energy1_input")) c.energy_file = "energy1_input";
  if (host::exists(c.hwmon_dir + "/power1_max")) c.power_limit_file = "power1_max";
  for (const char* t : {"temp1_input", "temp2_input", "temp3_input"})
    if (host::exists(c.hwmon_dir + "/" + t)) {
      c.temp_file = t;
      break;
    }
}

}  // namespace

LmemReading read_lmem(const IntelCard& card) {
  LmemReading r;
  if (card.driver != "i915") return r;
  const std::string total = card.card_dir + "/lmem_total_bytes";
  const std::string avail = card.card_dir + "/lmem_avail_bytes";
  std::string problem;
  r.total = read_count(total, &problem);
  r.problem = problem;
  r.available = read_count(avail, &problem);
  if (!problem.empty()) r.problem += (r.problem.empty() ? "" : "; ") + problem;
  if (r.total) r.source = "i915 lmem_total_bytes" + std::string(r.available ? ", lmem_avail_bytes" : "");
  if (r.total && r.available && *r.available > *r.total) {
    r.problem = avail + " (" + std::to_string(*r.available) + ") exceeds " + total + ": ignored";
    r.available.reset();
  }
  return r;
}

std::optional<IntelCard> read_intel_card(const std::string& card, const std::string& card_dir, std::string* why,
                                         std::vector<std::string>* problems) {
  const std::string device_dir = card_dir + "/device";
  if (host::read_hex32(device_dir + "/vendor").value_or(0) != 0x8086) return std::nullopt;
  const Uevent u = read_uevent(device_dir);
  if (u.driver != "i915" && u.driver != "xe") {
    if (why)
      *why = card + " is an Intel device (" + (u.slot.empty() ? device_dir : u.slot) + ") on driver " +
             (u.driver.empty() ? std::string("(none)") : u.driver) + ", not i915 or xe: not used";
    return std::nullopt;
  }
  IntelCard c;
  c.card = card;
  c.card_dir = card_dir;
  c.device_dir = device_dir;
  c.driver = u.driver;
  c.pci_address = u.slot;
  c.device_id = host::read_hex32(device_dir + "/device").value_or(0);
  c.revision = host::read_hex32(device_dir + "/revision").value_or(0);
  for (const std::string& name : host::list_dir(device_dir + "/drm"))
    if (host::starts_with(name, "renderD"))
      if (auto minor = host::parse_int(name.substr(7))) c.render_minor = static_cast<int>(*minor);
  if (c.driver == "xe") read_xe_layout(c, problems);
  else read_i915_layout(c, problems);
  read_hwmon(c);
  return c;
}

std::vector<IntelCard> find_intel_cards(std::vector<std::string>* notes, std::vector<std::string>* problems) {
  std::vector<IntelCard> out;
  const std::string drm = sysfs_path("class/drm");
  for (const std::string& name : host::list_dir(drm)) {
    if (!host::is_drm_card(name)) continue;
    const std::string vendor = drm + "/" + name + "/device/vendor";
    note_problem(problems, host::refusal(vendor, host::read_file(vendor)));
    std::string why;
    if (auto c = read_intel_card(name, drm + "/" + name, &why, problems)) out.push_back(std::move(*c));
    else if (!why.empty() && notes) notes->push_back(why);
  }
  return out;
}

}  // namespace accelkit::xpu
