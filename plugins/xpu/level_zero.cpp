#include "level_zero.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include <accelkit/sdk/host_paths.hpp>

#include "accelkit/sdk/support/plausible.hpp"

namespace accelkit::xpu {
namespace {

// More than any machine holds: a larger count is a malformed answer, refused before anything
// is allocated for it.
constexpr std::uint32_t kMaxDrivers = 16;
constexpr std::uint32_t kMaxDevices = 256;
constexpr std::uint32_t kMaxMemories = 16;
constexpr std::uint32_t kMaxSensors = 64;

std::string hex(std::int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string failed(const char* fn, ze::Result r) { return std::string(fn) + " returned " + hex(static_cast<std::uint32_t>(r)); }

template <class Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(handle, name));
}

struct CoreApi {
  ze::InitFn init = nullptr;
  ze::DriverGetFn driver_get = nullptr;
  ze::DeviceGetFn device_get = nullptr;
  ze::DevicePropertiesFn properties = nullptr;
  ze::MemoryPropertiesFn memory = nullptr;
  ze::PciPropertiesFn pci = nullptr;  // an extension: may be missing
};

void* open_loader(const LevelZeroOptions& options, LevelZero& out) {
  std::vector<std::string> names = options.libraries;
  if (names.empty()) {
    if (const char* forced = secure_env("ACCELKIT_LEVEL_ZERO_LOADER"); forced && *forced) names.push_back(forced);
    else names = {"libze_loader.so.1", "libze_loader.so"};
  }
  for (const std::string& name : names) {
    if (void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      out.library = name;
      return h;  // never dlclosed: the driver keeps threads and state
    }
    const char* e = ::dlerror();
    out.error = e ? e : "dlopen failed";
  }
  return nullptr;
}

// The two-call protocol: the count, checked against `limit`, then that many handles.
bool get_handles(const std::string& what, std::uint32_t limit, std::vector<ze::Handle>& handles,
                 const std::function<ze::Result(std::uint32_t*, ze::Handle*)>& call, LevelZero& out) {
  std::uint32_t n = 0;
  if (ze::Result r = call(&n, nullptr); r != ze::kSuccess) {
    out.problems.push_back(failed(what.c_str(), r));
    return false;
  }
  if (n > limit) {
    out.problems.push_back(what + " reported " + std::to_string(n) + " entries (more than " + std::to_string(limit) +
                           "): refused");
    return false;
  }
  handles.assign(n, nullptr);
  if (n == 0) return true;
  const std::uint32_t asked = n;
  if (ze::Result r = call(&n, handles.data()); r != ze::kSuccess) {
    out.problems.push_back(failed(what.c_str(), r));
    return false;
  }
  if (n > asked) {
    out.problems.push_back(what + " filled " + std::to_string(n) + " of " + std::to_string(asked) + " entries: refused");
    return false;
  }
  handles.resize(n);
  return true;
}

// The device's properties, or why they are refused.
std::string read_properties(const CoreApi& api, ze::Handle h, ZeDevice& d, bool& intel_gpu) {
  ze::DeviceProperties p{};
  p.stype = ze::kStypeDeviceProperties;
  if (ze::Result r = api.properties(h, &p); r != ze::kSuccess) return failed("zeDeviceGetProperties", r);
  if (p.stype != ze::kStypeDeviceProperties)
    return "zeDeviceGetProperties answered with stype " + hex(p.stype) + " (asked " + hex(ze::kStypeDeviceProperties) +
           "): refused";
  if (::memchr(p.name, '\0', sizeof p.name) == nullptr) return "zeDeviceGetProperties gave a name without its NUL: refused";
  d.name = p.name;
  intel_gpu = p.type == ze::kDeviceTypeGpu && p.vendorId == 0x8086;
  if (!intel_gpu) return "";
  d.device_id = p.deviceId;
  d.flags = p.flags;
  d.core_clock_mhz = p.coreClockRate;
  const std::uint64_t eus =
      std::uint64_t{p.numSlices} * p.numSubslicesPerSlice * p.numEUsPerSubslice;
  if (eus > 0 && eus < 100000) d.execution_units = static_cast<std::uint32_t>(eus);
  return "";
}

void read_memory(const CoreApi& api, ze::Handle h, ZeDevice& d, LevelZero& out) {
  std::uint32_t n = 0;
  if (api.memory(h, &n, nullptr) != ze::kSuccess || n == 0) return;
  if (n > kMaxMemories) {
    out.problems.push_back(d.name + ": zeDeviceGetMemoryProperties reported " + std::to_string(n) + " memories: refused");
    return;
  }
  std::vector<ze::MemoryProperties> mem(n);
  for (auto& m : mem) m.stype = ze::kStypeMemoryProperties;
  if (api.memory(h, &n, mem.data()) != ze::kSuccess || n > mem.size()) return;
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (mem[i].totalSize > plausible::kMaxMemoryBytes) {
      out.problems.push_back(d.name + ": memory " + std::to_string(i) + " of " + std::to_string(mem[i].totalSize) +
                             " bytes (more than 64 TiB): refused");
      return;
    }
    total += mem[i].totalSize;
  }
  d.memory_bytes = total;
}

void read_pci(const CoreApi& api, ze::Handle h, ZeDevice& d, LevelZero& out) {
  if (!api.pci) return;
  ze::PciExtProperties p{};
  p.stype = ze::kStypePciExtProperties;
  if (api.pci(h, &p) != ze::kSuccess) return;
  std::string problem;
  d.pci_address = pci_text(p, &problem);
  if (!problem.empty()) out.problems.push_back(d.name + ": " + problem);
}

void list_devices(const CoreApi& api, LevelZero& out) {
  std::vector<ze::Handle> drivers;
  if (!get_handles("zeDriverGet", kMaxDrivers, drivers,
                   [&](std::uint32_t* n, ze::Handle* h) { return api.driver_get(n, h); }, out))
    return;
  for (std::size_t di = 0; di < drivers.size(); ++di) {
    std::vector<ze::Handle> devices;
    if (!get_handles("zeDeviceGet", kMaxDevices, devices,
                     [&](std::uint32_t* n, ze::Handle* h) { return api.device_get(drivers[di], n, h); }, out))
      continue;
    for (ze::Handle h : devices) {
      ZeDevice d;
      d.handle = h;
      d.driver = di;
      bool intel_gpu = false;
      if (std::string why = read_properties(api, h, d, intel_gpu); !why.empty()) {
        out.problems.push_back("Level Zero device " + std::to_string(out.devices.size()) + ": " + why);
        continue;
      }
      if (!intel_gpu) {
        out.notes.push_back("Level Zero lists " + d.name + ", not an Intel GPU: skipped");
        continue;
      }
      read_memory(api, h, d, out);
      read_pci(api, h, d, out);
      out.devices.push_back(std::move(d));
    }
  }
}

}  // namespace

std::string pci_text(const ze::PciExtProperties& p, std::string* problem) {
  if (p.domain > 0xffff || p.bus > 0xff || p.device > 0x1f || p.function > 0x7) {
    if (problem)
      *problem = "PCI address out of range (domain " + hex(p.domain) + ", bus " + hex(p.bus) + ", device " +
                 hex(p.device) + ", function " + hex(p.function) + "): refused";
    return "";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", p.domain, p.bus, p.device, p.function);
  return buf;
}

LevelZero load_level_zero(const LevelZeroOptions& options) {
  LevelZero out;
  void* h = open_loader(options, out);
  if (!h) return out;
  out.loaded = true;
  out.error.clear();
  CoreApi api;
  api.init = symbol<ze::InitFn>(h, "zeInit");
  api.driver_get = symbol<ze::DriverGetFn>(h, "zeDriverGet");
  api.device_get = symbol<ze::DeviceGetFn>(h, "zeDeviceGet");
  api.properties = symbol<ze::DevicePropertiesFn>(h, "zeDeviceGetProperties");
  api.memory = symbol<ze::MemoryPropertiesFn>(h, "zeDeviceGetMemoryProperties");
  api.pci = symbol<ze::PciPropertiesFn>(h, "zeDevicePciGetPropertiesExt");
  if (!api.init || !api.driver_get || !api.device_get || !api.properties || !api.memory) {
    out.error = out.library + " lacks the Level Zero core entry points (zeInit, zeDriverGet, zeDeviceGet, ...)";
    return out;
  }
  auto sysman = std::make_shared<SysmanApi>();
  sysman->enum_temperature = symbol<ze::EnumFn>(h, "zesDeviceEnumTemperatureSensors");
  sysman->temperature = symbol<ze::TemperatureFn>(h, "zesTemperatureGetState");
  sysman->enum_power = symbol<ze::EnumFn>(h, "zesDeviceEnumPowerDomains");
  sysman->energy = symbol<ze::EnergyFn>(h, "zesPowerGetEnergyCounter");
  sysman->enum_frequency = symbol<ze::EnumFn>(h, "zesDeviceEnumFrequencyDomains");
  sysman->frequency_properties = symbol<ze::FreqPropertiesFn>(h, "zesFrequencyGetProperties");
  sysman->frequency_state = symbol<ze::FreqStateFn>(h, "zesFrequencyGetState");
  sysman->enum_memory = symbol<ze::EnumFn>(h, "zesDeviceEnumMemoryModules");
  sysman->memory_state = symbol<ze::MemStateFn>(h, "zesMemoryGetState");
  out.sysman = std::move(sysman);

  if (const char* user = std::getenv("ZES_ENABLE_SYSMAN")) {
    out.notes.push_back(std::string("ZES_ENABLE_SYSMAN=") + user + " kept (set by the user)");
  } else {
    ::setenv("ZES_ENABLE_SYSMAN", "1", 0);
    out.notes.push_back("ZES_ENABLE_SYSMAN=1 set before zeInit: Sysman reads the GPUs' sensors");
  }
  if (ze::Result r = api.init(ze::kInitGpuOnly); r != ze::kSuccess) {
    out.error = failed("zeInit", r) + " (no usable GPU driver: check the intel-level-zero-gpu / "
                                      "libze-intel-gpu1 package and access to /dev/dri)";
    return out;
  }
  out.initialised = true;
  list_devices(api, out);
  return out;
}

namespace {

// Sysman handles of one kind for `device`, or empty (a problem said when the answer is refused).
std::vector<ze::Handle> sysman_handles(ze::EnumFn fn, ze::Handle device, const char* what, SysmanReading& out) {
  std::vector<ze::Handle> handles;
  if (!fn) return handles;
  std::uint32_t n = 0;
  if (fn(device, &n, nullptr) != ze::kSuccess || n == 0) return handles;
  if (n > kMaxSensors) {
    out.problems.push_back(std::string(what) + " reported " + std::to_string(n) + " handles: refused");
    return handles;
  }
  handles.assign(n, nullptr);
  const std::uint32_t asked = n;
  if (fn(device, &n, handles.data()) != ze::kSuccess || n > asked) return {};
  handles.resize(n);
  return handles;
}

void read_temperature(const SysmanApi& api, ze::Handle device, SysmanReading& out) {
  const auto sensors = sysman_handles(api.enum_temperature, device, "zesDeviceEnumTemperatureSensors", out);
  if (sensors.empty() || !api.temperature) {
    out.notes.push_back("no Sysman temperature sensor");
    return;
  }
  for (ze::Handle s : sensors) {
    double c = 0;
    if (api.temperature(s, &c) != ze::kSuccess) continue;
    if (std::string why = plausible::check(c, "C"); !why.empty()) {
      out.problems.push_back("zesTemperatureGetState: " + why + ": refused");
      continue;
    }
    if (!out.temperature_c || c > *out.temperature_c) out.temperature_c = c;
  }
}

void read_energy(const SysmanApi& api, ze::Handle device, SysmanReading& out) {
  const auto domains = sysman_handles(api.enum_power, device, "zesDeviceEnumPowerDomains", out);
  if (domains.empty() || !api.energy) {
    out.notes.push_back("no Sysman power domain");
    return;
  }
  ze::EnergyCounter e{};
  if (api.energy(domains.front(), &e) == ze::kSuccess) out.energy = e;
}

void read_frequency(const SysmanApi& api, ze::Handle device, SysmanReading& out) {
  const auto domains = sysman_handles(api.enum_frequency, device, "zesDeviceEnumFrequencyDomains", out);
  for (ze::Handle d : domains) {
    if (!api.frequency_properties || !api.frequency_state) break;
    ze::FreqProperties p{};
    p.stype = ze::kStypeFreqProperties;
    if (api.frequency_properties(d, &p) != ze::kSuccess || p.type != ze::kFreqDomainGpu) continue;
    ze::FreqState s{};
    s.stype = ze::kStypeFreqState;
    if (api.frequency_state(d, &s) != ze::kSuccess) continue;
    if (s.actual >= 0 && plausible::check(s.actual, "MHz").empty()) out.frequency_mhz = s.actual;
    else if (s.actual >= 0) out.problems.push_back("zesFrequencyGetState: " + plausible::check(s.actual, "MHz"));
    if (p.max > 0 && plausible::check(p.max, "MHz").empty()) out.frequency_max_mhz = p.max;
    return;
  }
  out.notes.push_back("no Sysman GPU frequency domain");
}

void read_memory_state(const SysmanApi& api, ze::Handle device, SysmanReading& out) {
  const auto modules = sysman_handles(api.enum_memory, device, "zesDeviceEnumMemoryModules", out);
  if (modules.empty() || !api.memory_state) return;
  std::uint64_t free = 0, size = 0;
  for (ze::Handle m : modules) {
    ze::MemState s{};
    s.stype = ze::kStypeMemState;
    if (api.memory_state(m, &s) != ze::kSuccess) return;
    if (s.free > s.size || s.size > plausible::kMaxMemoryBytes) {
      out.problems.push_back("zesMemoryGetState: free " + std::to_string(s.free) + " of " + std::to_string(s.size) +
                             " bytes: refused");
      return;
    }
    free += s.free;
    size += s.size;
  }
  out.memory_free = free;
  out.memory_size = size;
}

}  // namespace

SysmanReading read_sysman(const SysmanApi& api, ze::Handle device) {
  SysmanReading out;
  read_temperature(api, device, out);
  read_energy(api, device, out);
  read_frequency(api, device, out);
  read_memory_state(api, device, out);
  return out;
}

}  // namespace accelkit::xpu
