// A stand-in for oneAPI Level Zero's loader (libze_loader.so.1) for the xpu plugin's tests. It
// exports the entry points of plugins/xpu/ze_abi.hpp with their Level Zero names and answers them
// from a small text file, so a test can present any set of Intel GPUs (and malformed answers)
// without Intel's runtime or hardware.
//
// Configuration
// -------------
// zeInit reads the file named by the environment variable ACCELKIT_FAKE_ZE. When the variable is
// unset or the file cannot be read, zeInit returns 0x78000001 (ZE_RESULT_ERROR_UNINITIALIZED) and
// tries again on the next call. Once read, the configuration is kept (and zeInit keeps returning
// the same result) until accelkit_fake_ze_reset() is called.
//
// One statement a line. `#` starts a comment (outside double quotes); blank lines are ignored.
// A statement is a keyword followed by whitespace-separated key=value tokens; a value holding
// spaces is written in double quotes (key="two words"). Numbers are decimal, or hexadecimal with
// a 0x prefix. An unknown keyword, an unknown key, a repeated single-valued key or a value that
// does not parse makes zeInit print file:line and the problem to stderr and return 0x7ffffffe
// (ZE_RESULT_ERROR_UNKNOWN).
//
//   init result=0x78000001
//       zeInit returns this value (default 0). Any nonzero value leaves the fake uninitialized:
//       every other entry point then returns ZE_RESULT_ERROR_UNINITIALIZED.
//   driver
//       Starts a driver; the device lines that follow belong to it. Device lines before the first
//       driver line (or in a file with no driver line) belong to one implicit driver.
//   device name="..." [key=value ...]
//       One device (a zeDeviceGet handle of the current driver). Keys, all optional but name:
//         vendor=0x8086 id=0 type=1 flags=0 subdevice=0   ze_device_properties_t vendorId,
//                                     deviceId, type (1 = GPU), flags (1 = integrated,
//                                     2 = sub-device), subdeviceId
//         clock=MHz slices= subslices= eus= threads= simd=
//                                     coreClockRate, numSlices, numSubslicesPerSlice,
//                                     numEUsPerSubslice, numThreadsPerEU, physicalEUSimdWidth
//         memory=BYTES                one zeDeviceGetMemoryProperties entry (totalSize); repeat the
//                                     key for more entries. The first is also maxMemAllocSize.
//         pci=DDDD:BB:DD.F            zeDevicePciGetPropertiesExt address (hex). Without it that
//                                     call returns 0x78000003 (ZE_RESULT_ERROR_UNSUPPORTED_FEATURE).
//         temp=CELSIUS                one Sysman temperature sensor; repeat for more sensors.
//         energy_uj= energy_step_uj= time_step_us=
//                                     one Sysman power domain (present when any of the three is
//                                     given). Its k-th zesPowerGetEnergyCounter call (k from 0)
//                                     returns energy = energy_uj + k * energy_step_uj and
//                                     timestamp = 1000000 + k * time_step_us, so the power over
//                                     two calls is energy_step_uj / time_step_us watts.
//                                     Defaults: 0, 0, 1000000.
//         freq=MHz freq_max=MHz       one Sysman GPU frequency domain (present when either is
//                                     given): properties type 0 (GPU), min 300, max freq_max;
//                                     state actual freq. A missing value reads -1 (unknown).
//         mem_free=BYTES mem_size=BYTES
//                                     one Sysman memory module (present when either is given);
//                                     zesMemoryGetState reports health 1 (OK), free, size.
//       Malformed answers, for the caller's validation:
//         stype=bad                   zeDeviceGetProperties writes stype 0x7fff instead of 0x3.
//         name_unterminated=1         zeDeviceGetProperties fills all 256 name bytes with 'A'.
//         count_lie=1                 zeDeviceGet on this device's driver answers the count query
//                                     with 100000, then fills (and counts) only the real devices.
//
// Example:
//   driver
//   device name="Intel(R) Arc(TM) A770 Graphics" id=0x56a0 pci=0000:03:00.0 memory=16225243136
//          temp=48 freq=2100 freq_max=2400          (one line in a real file)
//
// Behaviour common to every entry point
// -------------------------------------
// - Before a successful zeInit: 0x78000001 (ZE_RESULT_ERROR_UNINITIALIZED).
// - A handle that is not an entry of this library's own tables of the right kind (checked by
//   address, never dereferenced first): 0x78000004 (ZE_RESULT_ERROR_INVALID_ARGUMENT).
// - A null count or output pointer: 0x78000007 (ZE_RESULT_ERROR_INVALID_NULL_POINTER).
// - Enumerations (zeDriverGet, zeDeviceGet, zeDeviceGetMemoryProperties, zesDeviceEnum*) follow
//   Level Zero's two-call protocol: with a null array, *count receives the number available;
//   otherwise min(*count, available) entries are written and *count is set to that number.
//   A device without a given Sysman component enumerates zero of them, with success.
// - Sysman entry points take the core device handles zeDeviceGet returned.
// - Output structures get their stype written; the caller's pNext is left untouched.
//
// Test hooks (also exported, C linkage):
//   int accelkit_fake_ze_calls(const char* function_name)
//       How many times that entry point has been called since the library was loaded, counting
//       failed calls; counts survive accelkit_fake_ze_reset(). -1 for a name that is not one of
//       the fifteen entry points.
//   void accelkit_fake_ze_reset()
//       Forgets the configuration (and the energy counters' call positions); the next zeInit
//       reads ACCELKIT_FAKE_ZE again. Handles from before the reset may point at entries of the
//       next configuration or at none; either way they are checked, never trusted.

#include "ze_abi.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

namespace ze = accelkit::xpu::ze;

constexpr ze::Result kErrorUninitialized = 0x78000001;      // ZE_RESULT_ERROR_UNINITIALIZED
constexpr ze::Result kErrorUnsupportedFeature = 0x78000003; // ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
constexpr ze::Result kErrorInvalidArgument = 0x78000004;    // ZE_RESULT_ERROR_INVALID_ARGUMENT
constexpr ze::Result kErrorInvalidNullPointer = 0x78000007; // ZE_RESULT_ERROR_INVALID_NULL_POINTER
constexpr ze::Result kErrorUnknown = 0x7ffffffe;            // ZE_RESULT_ERROR_UNKNOWN
constexpr std::int32_t kStypeBad = 0x7fff;
constexpr std::uint32_t kCountLie = 100000;

// Table capacities. Entries live in fixed static arrays so a handle is the address of an entry
// and stays a valid address (possibly of an unused entry) across reloads.
constexpr std::size_t kMaxDrivers = 8;
constexpr std::size_t kMaxDevices = 64;
constexpr std::size_t kMaxSensors = 256;
constexpr std::size_t kMaxComponents = 64;  // power domains, frequency domains, memory modules

struct Driver {
  std::uint32_t first_device = 0;  // devices of a driver are contiguous in g_devices
  std::uint32_t device_count = 0;
  bool count_lie = false;
};

struct Device {
  std::string name;
  std::uint32_t vendor = 0x8086, id = 0, flags = 0, subdevice = 0, clock = 0;
  std::int32_t type = ze::kDeviceTypeGpu;
  std::uint32_t slices = 0, subslices = 0, eus = 0, threads = 0, simd = 0;
  std::vector<std::uint64_t> memory;
  bool has_pci = false;
  std::uint32_t pci_domain = 0, pci_bus = 0, pci_device = 0, pci_function = 0;
  bool stype_bad = false, name_unterminated = false;
};

struct Sensor {
  std::uint32_t device = 0;
  double celsius = 0;
};

struct Power {
  std::uint32_t device = 0;
  std::uint64_t energy_uj = 0, energy_step_uj = 0, time_step_us = 1000000;
  std::uint64_t calls = 0;
};

struct Freq {
  std::uint32_t device = 0;
  double actual = -1, max = -1;
};

struct MemModule {
  std::uint32_t device = 0;
  std::uint64_t free = 0, size = 0;
};

struct State {
  bool loaded = false;           // configuration read (successfully or not)
  ze::Result init_result = 0;    // what zeInit returns once loaded
  std::size_t drivers = 0, devices = 0, sensors = 0, powers = 0, freqs = 0, mems = 0;
};

std::mutex g_mutex;
State g_state;
std::array<Driver, kMaxDrivers> g_drivers;
std::array<Device, kMaxDevices> g_devices;
std::array<Sensor, kMaxSensors> g_sensors;
std::array<Power, kMaxComponents> g_powers;
std::array<Freq, kMaxComponents> g_freqs;
std::array<MemModule, kMaxComponents> g_mems;

// Call counters, one per entry point, in the order of kFunctionNames.
enum Fn {
  kZeInit, kZeDriverGet, kZeDeviceGet, kZeDeviceGetProperties, kZeDeviceGetMemoryProperties,
  kZeDevicePciGetPropertiesExt, kZesDeviceEnumTemperatureSensors, kZesTemperatureGetState,
  kZesDeviceEnumPowerDomains, kZesPowerGetEnergyCounter, kZesDeviceEnumFrequencyDomains,
  kZesFrequencyGetProperties, kZesFrequencyGetState, kZesDeviceEnumMemoryModules,
  kZesMemoryGetState, kFnCount
};
constexpr std::array<const char*, kFnCount> kFunctionNames = {
    "zeInit", "zeDriverGet", "zeDeviceGet", "zeDeviceGetProperties",
    "zeDeviceGetMemoryProperties", "zeDevicePciGetPropertiesExt",
    "zesDeviceEnumTemperatureSensors", "zesTemperatureGetState", "zesDeviceEnumPowerDomains",
    "zesPowerGetEnergyCounter", "zesDeviceEnumFrequencyDomains", "zesFrequencyGetProperties",
    "zesFrequencyGetState", "zesDeviceEnumMemoryModules", "zesMemoryGetState"};
std::array<std::atomic<int>, kFnCount> g_calls{};

void count_call(Fn fn) { g_calls[static_cast<std::size_t>(fn)].fetch_add(1); }

// Index of `handle` in table[0, used) when it is exactly the address of one of those entries;
// -1 otherwise. Compares integer addresses, so a foreign pointer is never dereferenced.
template <typename T, std::size_t N>
long index_of(const std::array<T, N>& table, std::size_t used, const void* handle) {
  const auto base = reinterpret_cast<std::uintptr_t>(table.data());
  const auto p = reinterpret_cast<std::uintptr_t>(handle);
  if (p < base) return -1;
  const std::uintptr_t offset = p - base;
  if (offset % sizeof(T) != 0) return -1;
  const std::uintptr_t i = offset / sizeof(T);
  if (i >= used) return -1;
  return static_cast<long>(i);
}

ze::Handle handle_of(const void* entry) { return const_cast<void*>(entry); }

// The two-call protocol over `available` entries: the count query, or the number to write.
// Returns false when the caller asked only for the count.
bool two_call(std::uint32_t* count, const void* array, std::uint32_t available,
              std::uint32_t* to_write) {
  if (array == nullptr) {
    *count = available;
    return false;
  }
  *to_write = *count < available ? *count : available;
  *count = *to_write;
  return true;
}

// ---- Configuration parsing ----

struct ParseError {
  explicit ParseError(std::string m) : message(std::move(m)) {}
  std::string message;
  int line = 0;  // 1-based; set by parse_config
};

struct Token {
  std::string key, value;
};

// Splits a line (comment already removed) into words; key="a b" keeps its spaces.
std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i >= line.size()) break;
    std::string word;
    bool quoted = false;
    while (i < line.size() && (quoted || (line[i] != ' ' && line[i] != '\t' && line[i] != '\r'))) {
      if (line[i] == '"') {
        quoted = !quoted;
      } else {
        word += line[i];
      }
      ++i;
    }
    if (quoted) throw ParseError{"unterminated double quote"};
    words.push_back(word);
  }
  return words;
}

// The line without its comment: from the first `#` outside double quotes.
std::string strip_comment(const std::string& line) {
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') quoted = !quoted;
    if (line[i] == '#' && !quoted) return line.substr(0, i);
  }
  return line;
}

std::uint64_t parse_u64(const Token& t) {
  const std::string& s = t.value;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char* digits = s.c_str() + (hex ? 2 : 0);
  if (*digits == '\0' || *digits == '-' || *digits == '+' || *digits == ' ')
    throw ParseError{"bad number for " + t.key + ": '" + s + "'"};
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(digits, &end, hex ? 16 : 10);
  if (errno != 0 || end == digits || *end != '\0')
    throw ParseError{"bad number for " + t.key + ": '" + s + "'"};
  return v;
}

std::uint32_t parse_u32(const Token& t) {
  const std::uint64_t v = parse_u64(t);
  if (v > 0xffffffffull) throw ParseError{"value out of range for " + t.key + ": '" + t.value + "'"};
  return static_cast<std::uint32_t>(v);
}

double parse_double(const Token& t) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(t.value.c_str(), &end);
  if (errno != 0 || t.value.empty() || *end != '\0')
    throw ParseError{"bad number for " + t.key + ": '" + t.value + "'"};
  return v;
}

bool parse_switch(const Token& t) {
  if (t.value == "1") return true;
  if (t.value == "0") return false;
  throw ParseError{t.key + " takes 0 or 1, not '" + t.value + "'"};
}

// DDDD:BB:DD.F, hexadecimal fields.
void parse_pci(const Token& t, Device& d) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  int consumed = 0;
  if (std::sscanf(t.value.c_str(), "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &consumed) != 4 ||
      static_cast<std::size_t>(consumed) != t.value.size() || domain > 0xffff || bus > 0xff ||
      dev > 0x1f || fn > 0x7)
    throw ParseError{"bad pci address '" + t.value + "' (want DDDD:BB:DD.F)"};
  d.has_pci = true;
  d.pci_domain = domain;
  d.pci_bus = bus;
  d.pci_device = dev;
  d.pci_function = fn;
}

std::vector<Token> tokens_of(const std::vector<std::string>& words) {
  std::vector<Token> tokens;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::size_t eq = words[i].find('=');
    if (eq == std::string::npos || eq == 0)
      throw ParseError{"expected key=value, got '" + words[i] + "'"};
    tokens.push_back({words[i].substr(0, eq), words[i].substr(eq + 1)});
  }
  return tokens;
}

// What one device line declares, before it is added to the tables.
struct DeviceLine {
  Device d;
  bool has_name = false, count_lie = false;
  bool has_power = false, has_freq = false, has_mem = false;
  Power power;
  Freq freq;
  MemModule mem;
  std::vector<double> temps;
};

// A key of ze_device_properties_t or the device's identity; false when `t` is not one.
bool apply_property_key(const Token& t, DeviceLine& l) {
  Device& d = l.d;
  struct U32Key {
    const char* key;
    std::uint32_t Device::*field;
  };
  static const U32Key kU32[] = {{"vendor", &Device::vendor},   {"id", &Device::id},
                                {"flags", &Device::flags},     {"subdevice", &Device::subdevice},
                                {"clock", &Device::clock},     {"slices", &Device::slices},
                                {"subslices", &Device::subslices}, {"eus", &Device::eus},
                                {"threads", &Device::threads}, {"simd", &Device::simd}};
  for (const U32Key& k : kU32)
    if (t.key == k.key) {
      d.*k.field = parse_u32(t);
      return true;
    }
  if (t.key == "name") {
    if (t.value.size() >= ze::kMaxDeviceName) throw ParseError{"name longer than 255 bytes"};
    d.name = t.value;
    l.has_name = true;
  } else if (t.key == "type") {
    d.type = static_cast<std::int32_t>(parse_u32(t));
  } else if (t.key == "memory") {
    d.memory.push_back(parse_u64(t));
  } else if (t.key == "pci") {
    parse_pci(t, d);
  } else if (t.key == "stype") {
    if (t.value != "bad") throw ParseError{"stype takes only 'bad'"};
    d.stype_bad = true;
  } else if (t.key == "name_unterminated") {
    d.name_unterminated = parse_switch(t);
  } else if (t.key == "count_lie") {
    l.count_lie = parse_switch(t);
  } else {
    return false;
  }
  return true;
}

// A Sysman key (sensors, power, frequency, memory module); false when `t` is not one.
bool apply_sysman_key(const Token& t, DeviceLine& l) {
  if (t.key == "temp") {
    l.temps.push_back(parse_double(t));
  } else if (t.key == "energy_uj" || t.key == "energy_step_uj" || t.key == "time_step_us") {
    const std::uint64_t v = parse_u64(t);
    (t.key == "energy_uj" ? l.power.energy_uj : t.key == "energy_step_uj" ? l.power.energy_step_uj
                                                                          : l.power.time_step_us) = v;
    l.has_power = true;
  } else if (t.key == "freq" || t.key == "freq_max") {
    (t.key == "freq" ? l.freq.actual : l.freq.max) = parse_double(t);
    l.has_freq = true;
  } else if (t.key == "mem_free" || t.key == "mem_size") {
    (t.key == "mem_free" ? l.mem.free : l.mem.size) = parse_u64(t);
    l.has_mem = true;
  } else {
    return false;
  }
  return true;
}

// Adds a parsed device line to the tables, under driver `driver`.
void commit_device(DeviceLine& l, State& st, long driver) {
  const auto dev_index = static_cast<std::uint32_t>(st.devices);
  if (st.sensors + l.temps.size() > kMaxSensors) throw ParseError{"too many temperature sensors"};
  if ((l.has_power && st.powers == kMaxComponents) || (l.has_freq && st.freqs == kMaxComponents) ||
      (l.has_mem && st.mems == kMaxComponents))
    throw ParseError{"too many Sysman components"};
  for (double c : l.temps) g_sensors[st.sensors++] = Sensor{dev_index, c};
  if (l.has_power) {
    l.power.device = dev_index;
    g_powers[st.powers++] = l.power;
  }
  if (l.has_freq) {
    l.freq.device = dev_index;
    g_freqs[st.freqs++] = l.freq;
  }
  if (l.has_mem) {
    l.mem.device = dev_index;
    g_mems[st.mems++] = l.mem;
  }
  g_devices[st.devices++] = std::move(l.d);
  Driver& drv = g_drivers[static_cast<std::size_t>(driver)];
  ++drv.device_count;
  drv.count_lie = drv.count_lie || l.count_lie;
}

void start_driver(State& st, long& current_driver) {
  if (st.drivers == kMaxDrivers) throw ParseError{"too many drivers"};
  current_driver = static_cast<long>(st.drivers);
  g_drivers[st.drivers++] = Driver{static_cast<std::uint32_t>(st.devices), 0, false};
}

void parse_device(const std::vector<Token>& tokens, State& st, long& current_driver) {
  if (current_driver < 0) start_driver(st, current_driver);  // the implicit driver
  if (st.devices == kMaxDevices) throw ParseError{"too many devices"};
  DeviceLine l;
  std::vector<std::string> seen;  // single-valued keys already given
  for (const Token& t : tokens) {
    if (t.key != "memory" && t.key != "temp") {
      for (const std::string& k : seen)
        if (k == t.key) throw ParseError{"key '" + t.key + "' given twice"};
      seen.push_back(t.key);
    }
    if (!apply_property_key(t, l) && !apply_sysman_key(t, l)) throw ParseError{"unknown device key '" + t.key + "'"};
  }
  if (!l.has_name) throw ParseError{"device without name="};
  commit_device(l, st, current_driver);
}

// One line of the configuration; throws ParseError.
void parse_statement(const std::string& line, State& st, bool& saw_init, long& current_driver) {
  const std::vector<std::string> words = split_words(strip_comment(line));
  if (words.empty()) return;
  const std::string& keyword = words[0];
  const std::vector<Token> tokens = tokens_of(words);
  if (keyword == "init") {
    if (saw_init) throw ParseError{"a second init line"};
    saw_init = true;
    for (const Token& t : tokens) {
      if (t.key != "result") throw ParseError{"unknown init key '" + t.key + "'"};
      st.init_result = static_cast<ze::Result>(parse_u32(t));
    }
  } else if (keyword == "driver") {
    if (!tokens.empty()) throw ParseError{"driver takes no keys"};
    start_driver(st, current_driver);
  } else if (keyword == "device") {
    parse_device(tokens, st, current_driver);
  } else {
    throw ParseError{"unknown statement '" + keyword + "'"};
  }
}

// Fills the tables from the file's text; throws ParseError.
void parse_config(const std::string& text, State& st) {
  std::istringstream in(text);
  std::string line;
  bool saw_init = false;
  long current_driver = -1;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    try {
      parse_statement(line, st, saw_init, current_driver);
    } catch (ParseError& e) {
      e.line = line_number;
      throw;
    }
  }
}

void clear_tables() {
  g_state = State{};
  g_drivers.fill(Driver{});
  for (Device& d : g_devices) d = Device{};
  g_sensors.fill(Sensor{});
  g_powers.fill(Power{});
  g_freqs.fill(Freq{});
  g_mems.fill(MemModule{});
}

// Reads ACCELKIT_FAKE_ZE into the tables (caller holds g_mutex).
ze::Result load_config() {
  const char* path = std::getenv("ACCELKIT_FAKE_ZE");
  if (path == nullptr || *path == '\0') return kErrorUninitialized;
  std::ifstream file(path, std::ios::binary);
  if (!file) return kErrorUninitialized;
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return kErrorUninitialized;

  clear_tables();
  try {
    parse_config(text.str(), g_state);
  } catch (const ParseError& e) {
    std::fprintf(stderr, "fake_ze_loader: %s:%d: %s\n", path, e.line, e.message.c_str());
    clear_tables();
    g_state.loaded = true;
    g_state.init_result = kErrorUnknown;
    return kErrorUnknown;
  }
  g_state.loaded = true;
  return g_state.init_result;
}

bool initialized() { return g_state.loaded && g_state.init_result == ze::kSuccess; }

long device_index(ze::Handle device) { return index_of(g_devices, g_state.devices, device); }

// Shared body of the zesDeviceEnum* entry points: the entries of `table` whose device is
// `device`, in table order.
template <typename T, std::size_t N>
ze::Result enumerate(const std::array<T, N>& table, std::size_t used, ze::Handle device,
                     std::uint32_t* count, ze::Handle* handles) {
  if (!initialized()) return kErrorUninitialized;
  const long dev = device_index(device);
  if (dev < 0) return kErrorInvalidArgument;
  if (count == nullptr) return kErrorInvalidNullPointer;
  std::uint32_t available = 0;
  for (std::size_t i = 0; i < used; ++i)
    if (table[i].device == static_cast<std::uint32_t>(dev)) ++available;
  std::uint32_t to_write = 0;
  if (!two_call(count, handles, available, &to_write)) return ze::kSuccess;
  std::uint32_t written = 0;
  for (std::size_t i = 0; i < used && written < to_write; ++i)
    if (table[i].device == static_cast<std::uint32_t>(dev)) handles[written++] = handle_of(&table[i]);
  return ze::kSuccess;
}

}  // namespace

#define ACCELKIT_FAKE_ZE_EXPORT extern "C" __attribute__((visibility("default")))

ACCELKIT_FAKE_ZE_EXPORT ze::Result zeInit(std::uint32_t flags) {
  count_call(kZeInit);
  (void)flags;  // ZE_INIT_FLAG_GPU_ONLY and friends select nothing here
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_state.loaded) return g_state.init_result;
  return load_config();
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zeDriverGet(std::uint32_t* count, ze::Handle* drivers) {
  count_call(kZeDriverGet);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!initialized()) return kErrorUninitialized;
  if (count == nullptr) return kErrorInvalidNullPointer;
  std::uint32_t to_write = 0;
  if (!two_call(count, drivers, static_cast<std::uint32_t>(g_state.drivers), &to_write))
    return ze::kSuccess;
  for (std::uint32_t i = 0; i < to_write; ++i) drivers[i] = handle_of(&g_drivers[i]);
  return ze::kSuccess;
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zeDeviceGet(ze::Handle driver, std::uint32_t* count,
                                               ze::Handle* devices) {
  count_call(kZeDeviceGet);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!initialized()) return kErrorUninitialized;
  const long drv = index_of(g_drivers, g_state.drivers, driver);
  if (drv < 0) return kErrorInvalidArgument;
  if (count == nullptr) return kErrorInvalidNullPointer;
  const Driver& d = g_drivers[static_cast<std::size_t>(drv)];
  if (devices == nullptr) {
    *count = d.count_lie ? kCountLie : d.device_count;
    return ze::kSuccess;
  }
  std::uint32_t to_write = 0;
  two_call(count, devices, d.device_count, &to_write);
  for (std::uint32_t i = 0; i < to_write; ++i)
    devices[i] = handle_of(&g_devices[d.first_device + i]);
  return ze::kSuccess;
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zeDeviceGetProperties(ze::Handle device,
                                                         ze::DeviceProperties* props) {
  count_call(kZeDeviceGetProperties);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!initialized()) return kErrorUninitialized;
  const long dev = device_index(device);
  if (dev < 0) return kErrorInvalidArgument;
  if (props == nullptr) return kErrorInvalidNullPointer;
  const Device& d = g_devices[static_cast<std::size_t>(dev)];
  void* const next = props->pNext;
  std::memset(static_cast<void*>(props), 0, sizeof *props);
  props->stype = d.stype_bad ? kStypeBad : ze::kStypeDeviceProperties;
  props->pNext = next;
  props->type = d.type;
  props->vendorId = d.vendor;
  props->deviceId = d.id;
  props->flags = d.flags;
  props->subdeviceId = d.subdevice;
  props->coreClockRate = d.clock;
  props->maxMemAllocSize = d.memory.empty() ? 0 : d.memory.front();
  props->maxHardwareContexts = 4096;
  props->maxCommandQueuePriority = 0;
  props->numThreadsPerEU = d.threads;
  props->physicalEUSimdWidth = d.simd;
  props->numEUsPerSubslice = d.eus;
  props->numSubslicesPerSlice = d.subslices;
  props->numSlices = d.slices;
  props->timerResolution = 52;  // fixed, not modelled
  props->timestampValidBits = 64;
  props->kernelTimestampValidBits = 32;
  // A stable, per-device UUID: vendor, device id, PCI address, sub-device id, table index.
  const std::uint8_t uuid[16] = {
      static_cast<std::uint8_t>(d.vendor), static_cast<std::uint8_t>(d.vendor >> 8),
      static_cast<std::uint8_t>(d.id), static_cast<std::uint8_t>(d.id >> 8),
      static_cast<std::uint8_t>(d.pci_domain), static_cast<std::uint8_t>(d.pci_domain >> 8),
      static_cast<std::uint8_t>(d.pci_bus), static_cast<std::uint8_t>(d.pci_device),
      static_cast<std::uint8_t>(d.pci_function), static_cast<std::uint8_t>(d.subdevice),
      static_cast<std::uint8_t>(dev), 0, 0, 0, 0, 0};
  std::memcpy(props->uuid, uuid, sizeof uuid);
  if (d.name_unterminated) {
    std::memset(props->name, 'A', ze::kMaxDeviceName);
  } else {
    std::memcpy(props->name, d.name.c_str(), d.name.size() + 1);  // size < 256, checked at parse
  }
  return ze::kSuccess;
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zeDeviceGetMemoryProperties(ze::Handle device,
                                                               std::uint32_t* count,
                                                               ze::MemoryProperties* props) {
  count_call(kZeDeviceGetMemoryProperties);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!initialized()) return kErrorUninitialized;
  const long dev = device_index(device);
  if (dev < 0) return kErrorInvalidArgument;
  if (count == nullptr) return kErrorInvalidNullPointer;
  const Device& d = g_devices[static_cast<std::size_t>(dev)];
  std::uint32_t to_write = 0;
  if (!two_call(count, props, static_cast<std::uint32_t>(d.memory.size()), &to_write))
    return ze::kSuccess;
  for (std::uint32_t i = 0; i < to_write; ++i) {
    ze::MemoryProperties& m = props[i];
    void* const next = m.pNext;
    std::memset(static_cast<void*>(&m), 0, sizeof m);
    m.stype = ze::kStypeMemoryProperties;
    m.pNext = next;
    m.totalSize = d.memory[i];  // clock, bus width and name stay 0 / empty: not modelled
  }
  return ze::kSuccess;
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zeDevicePciGetPropertiesExt(ze::Handle device,
                                                               ze::PciExtProperties* props) {
  count_call(kZeDevicePciGetPropertiesExt);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!initialized()) return kErrorUninitialized;
  const long dev = device_index(device);
  if (dev < 0) return kErrorInvalidArgument;
  if (props == nullptr) return kErrorInvalidNullPointer;
  const Device& d = g_devices[static_cast<std::size_t>(dev)];
  if (!d.has_pci) return kErrorUnsupportedFeature;
  void* const next = props->pNext;
  std::memset(static_cast<void*>(props), 0, sizeof *props);
  props->stype = ze::kStypePciExtProperties;
  props->pNext = next;
  props->domain = d.pci_domain;
  props->bus = d.pci_bus;
  props->device = d.pci_device;
  props->function = d.pci_function;
  props->gen_version = -1;  // unknown, as the specification allows
  props->width = -1;
  props->max_bandwidth = -1;
  return ze::kSuccess;
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesDeviceEnumTemperatureSensors(ze::Handle device,
                                                                   std::uint32_t* count,
                                                                   ze::Handle* sensors) {
  count_call(kZesDeviceEnumTemperatureSensors);
  std::lock_guard<std::mutex> lock(g_mutex);
  return enumerate(g_sensors, g_state.sensors, device, count, sensors);
}

// The checks every Sysman getter makes (initialised, a handle of its own table, an output),
// then `fill(entry, *out)` under the lock.
template <typename T, std::size_t N, typename Out, typename Fill>
ze::Result get_entry(std::array<T, N>& table, const std::size_t& used, ze::Handle handle, Out* out, Fill fill) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!initialized()) return kErrorUninitialized;
  const long i = index_of(table, used, handle);
  if (i < 0) return kErrorInvalidArgument;
  if (out == nullptr) return kErrorInvalidNullPointer;
  fill(table[static_cast<std::size_t>(i)], *out);
  return ze::kSuccess;
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesTemperatureGetState(ze::Handle sensor, double* celsius) {
  count_call(kZesTemperatureGetState);
  return get_entry(g_sensors, g_state.sensors, sensor, celsius,
                   [](const Sensor& t, double& out) { out = t.celsius; });
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesDeviceEnumPowerDomains(ze::Handle device,
                                                             std::uint32_t* count,
                                                             ze::Handle* domains) {
  count_call(kZesDeviceEnumPowerDomains);
  std::lock_guard<std::mutex> lock(g_mutex);
  return enumerate(g_powers, g_state.powers, device, count, domains);
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesPowerGetEnergyCounter(ze::Handle domain,
                                                            ze::EnergyCounter* counter) {
  count_call(kZesPowerGetEnergyCounter);
  return get_entry(g_powers, g_state.powers, domain, counter, [](Power& p, auto& out) {
    const std::uint64_t k = p.calls++;
    out.energy = p.energy_uj + k * p.energy_step_uj;
    out.timestamp = 1000000 + k * p.time_step_us;
  });
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesDeviceEnumFrequencyDomains(ze::Handle device,
                                                                 std::uint32_t* count,
                                                                 ze::Handle* domains) {
  count_call(kZesDeviceEnumFrequencyDomains);
  std::lock_guard<std::mutex> lock(g_mutex);
  return enumerate(g_freqs, g_state.freqs, device, count, domains);
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesFrequencyGetProperties(ze::Handle domain,
                                                             ze::FreqProperties* props) {
  count_call(kZesFrequencyGetProperties);
  return get_entry(g_freqs, g_state.freqs, domain, props, [](const Freq& f, auto& out) {
    void* const next = out.pNext;
    std::memset(static_cast<void*>(&out), 0, sizeof out);
    out.stype = ze::kStypeFreqProperties;
    out.pNext = next;
    out.type = ze::kFreqDomainGpu;
    out.onSubdevice = 0;
    out.subdeviceId = 0;
    out.canControl = 0;
    out.isThrottleEventSupported = 0;
    out.min = 300;
    out.max = f.max;
  });
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesFrequencyGetState(ze::Handle domain, ze::FreqState* state) {
  count_call(kZesFrequencyGetState);
  return get_entry(g_freqs, g_state.freqs, domain, state, [](const Freq& f, auto& out) {
    const void* const next = out.pNext;
    std::memset(static_cast<void*>(&out), 0, sizeof out);
    out.stype = ze::kStypeFreqState;
    out.pNext = next;
    out.currentVoltage = -1;
    out.request = f.actual;
    out.tdp = f.max;
    out.efficient = -1;
    out.actual = f.actual;
    out.throttleReasons = 0;
  });
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesDeviceEnumMemoryModules(ze::Handle device,
                                                              std::uint32_t* count,
                                                              ze::Handle* modules) {
  count_call(kZesDeviceEnumMemoryModules);
  std::lock_guard<std::mutex> lock(g_mutex);
  return enumerate(g_mems, g_state.mems, device, count, modules);
}

ACCELKIT_FAKE_ZE_EXPORT ze::Result zesMemoryGetState(ze::Handle module, ze::MemState* state) {
  count_call(kZesMemoryGetState);
  return get_entry(g_mems, g_state.mems, module, state, [](const MemModule& m, auto& out) {
    const void* const next = out.pNext;
    std::memset(static_cast<void*>(&out), 0, sizeof out);
    out.stype = ze::kStypeMemState;
    out.pNext = next;
    out.health = 1;  // ZES_MEM_HEALTH_OK
    out.free = m.free;
    out.size = m.size;
  });
}

ACCELKIT_FAKE_ZE_EXPORT int accelkit_fake_ze_calls(const char* function_name) {
  if (function_name == nullptr) return -1;
  for (std::size_t i = 0; i < kFunctionNames.size(); ++i)
    if (std::strcmp(function_name, kFunctionNames[i]) == 0) return g_calls[i].load();
  return -1;
}

ACCELKIT_FAKE_ZE_EXPORT void accelkit_fake_ze_reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  clear_tables();
}

// The exported signatures are the plugin's function-pointer types, exactly.
static_assert(std::is_same_v<decltype(&zeInit), ze::InitFn>);
static_assert(std::is_same_v<decltype(&zeDriverGet), ze::DriverGetFn>);
static_assert(std::is_same_v<decltype(&zeDeviceGet), ze::DeviceGetFn>);
static_assert(std::is_same_v<decltype(&zeDeviceGetProperties), ze::DevicePropertiesFn>);
static_assert(std::is_same_v<decltype(&zeDeviceGetMemoryProperties), ze::MemoryPropertiesFn>);
static_assert(std::is_same_v<decltype(&zeDevicePciGetPropertiesExt), ze::PciPropertiesFn>);
static_assert(std::is_same_v<decltype(&zesDeviceEnumTemperatureSensors), ze::EnumFn>);
static_assert(std::is_same_v<decltype(&zesTemperatureGetState), ze::TemperatureFn>);
static_assert(std::is_same_v<decltype(&zesDeviceEnumPowerDomains), ze::EnumFn>);
static_assert(std::is_same_v<decltype(&zesPowerGetEnergyCounter), ze::EnergyFn>);
static_assert(std::is_same_v<decltype(&zesDeviceEnumFrequencyDomains), ze::EnumFn>);
static_assert(std::is_same_v<decltype(&zesFrequencyGetProperties), ze::FreqPropertiesFn>);
static_assert(std::is_same_v<decltype(&zesFrequencyGetState), ze::FreqStateFn>);
static_assert(std::is_same_v<decltype(&zesDeviceEnumMemoryModules), ze::EnumFn>);
static_assert(std::is_same_v<decltype(&zesMemoryGetState), ze::MemStateFn>);
