// oneAPI Level Zero, opened at run time (never linked) so the plugin loads on any machine:
// libze_loader.so.1, or the file ACCELKIT_LEVEL_ZERO_LOADER names. The probe initialises it
// for GPUs only (zeInit), lists each driver's Intel GPUs with their properties, memory and PCI
// address, and keeps the Sysman entry points the monitor reads temperature, energy, frequency
// and memory through. Sysman takes core device handles when ZES_ENABLE_SYSMAN=1 is set before
// zeInit: the probe sets it unless the user already did (and says so).
//
// Level Zero's answers are checked, never trusted: counts beyond what a machine can hold, a
// structure whose stype came back changed, a name without its terminating NUL, a PCI address
// or memory size out of range are refused with the reason (in `problems`), and the device or
// the figure is left out. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ze_abi.hpp"

namespace accelkit::xpu {

struct ZeDevice {
  ze::Handle handle = nullptr;
  std::size_t driver = 0;  // index among the drivers zeDriverGet returned
  std::string name;        // "Intel(R) Arc(TM) A770 Graphics"
  std::uint32_t device_id = 0;
  std::uint32_t flags = 0;
  std::uint32_t core_clock_mhz = 0;
  std::uint32_t execution_units = 0;  // slices x sub-slices x EUs per sub-slice; 0 = not given
  std::uint64_t memory_bytes = 0;     // the device's memories' totalSize, summed; 0 = none given
  std::string pci_address;            // "0000:03:00.0"; "" when the driver does not give it
  bool integrated() const { return (flags & ze::kFlagIntegrated) != 0; }
};

// The Sysman entry points (nullptr where the loader lacks one).
struct SysmanApi {
  ze::EnumFn enum_temperature = nullptr;
  ze::TemperatureFn temperature = nullptr;
  ze::EnumFn enum_power = nullptr;
  ze::EnergyFn energy = nullptr;
  ze::EnumFn enum_frequency = nullptr;
  ze::FreqPropertiesFn frequency_properties = nullptr;
  ze::FreqStateFn frequency_state = nullptr;
  ze::EnumFn enum_memory = nullptr;
  ze::MemStateFn memory_state = nullptr;
};

struct LevelZero {
  bool loaded = false;
  std::string library;      // what opened; "" when nothing did
  std::string error;        // why nothing opened, or why zeInit failed
  bool initialised = false;  // zeInit succeeded
  std::vector<ZeDevice> devices;      // Intel GPUs, in the drivers' order (LibTorch's XPU order)
  std::shared_ptr<const SysmanApi> sysman;  // null when not loaded
  std::vector<std::string> notes;     // facts worth showing
  std::vector<std::string> problems;  // answers refused, with the reason
};

struct LevelZeroOptions {
  // Tried in order; empty = ACCELKIT_LEVEL_ZERO_LOADER when set, else libze_loader.so.1 and
  // libze_loader.so.
  std::vector<std::string> libraries;
};

LevelZero load_level_zero(const LevelZeroOptions& options = {});

// "0000:03:00.0", or "" when a field is out of PCI's range (and `problem` says so).
std::string pci_text(const ze::PciExtProperties& p, std::string* problem);

// One reading of a device through Sysman. Each figure is nullopt when the device has no such
// sensor (note says so) or its answer was refused (problems say why).
struct SysmanReading {
  std::optional<double> temperature_c;  // the hottest sensor
  std::optional<ze::EnergyCounter> energy;  // the first power domain (the card or package)
  std::optional<double> frequency_mhz;  // the first GPU frequency domain
  std::optional<double> frequency_max_mhz;
  std::optional<std::uint64_t> memory_free;  // the device's memory modules, summed
  std::optional<std::uint64_t> memory_size;
  std::vector<std::string> notes;
  std::vector<std::string> problems;
};
SysmanReading read_sysman(const SysmanApi& api, ze::Handle device);

}  // namespace accelkit::xpu
