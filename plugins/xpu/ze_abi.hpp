// The part of oneAPI Level Zero (core and Sysman, API 1.x) the xpu plugin calls, declared here
// because the plugin never links Intel's runtime: libze_loader.so.1 is dlopened when present.
// Layouts follow the Level Zero specification's ze_api.h / zes_api.h (1.x keeps them stable;
// every queried structure starts with its `stype`); the static_asserts pin the sizes the
// specification's LP64 layout gives. Torch-free, no state.
#pragma once

#include <cstddef>
#include <cstdint>

namespace accelkit::xpu::ze {

using Result = std::int32_t;  // ze_result_t: 0 = success
using Bool = std::uint8_t;    // ze_bool_t
using Handle = void*;         // every handle type is an opaque pointer

inline constexpr Result kSuccess = 0;
inline constexpr std::uint32_t kInitGpuOnly = 1;          // ZE_INIT_FLAG_GPU_ONLY
inline constexpr std::int32_t kDeviceTypeGpu = 1;         // ZE_DEVICE_TYPE_GPU
inline constexpr std::uint32_t kFlagIntegrated = 1u << 0; // ZE_DEVICE_PROPERTY_FLAG_INTEGRATED
inline constexpr std::uint32_t kFlagSubdevice = 1u << 1;  // ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE
inline constexpr std::size_t kMaxDeviceName = 256;        // ZE_MAX_DEVICE_NAME

// stype values (ze_structure_type_t, zes_structure_type_t).
inline constexpr std::int32_t kStypeDeviceProperties = 0x3;
inline constexpr std::int32_t kStypeMemoryProperties = 0x7;
inline constexpr std::int32_t kStypePciExtProperties = 0x10008;
inline constexpr std::int32_t kStypeFreqProperties = 0x9;   // ZES_STRUCTURE_TYPE_FREQ_PROPERTIES
inline constexpr std::int32_t kStypeFreqState = 0x1b;       // ZES_STRUCTURE_TYPE_FREQ_STATE
inline constexpr std::int32_t kStypeMemState = 0x1e;        // ZES_STRUCTURE_TYPE_MEM_STATE
inline constexpr std::int32_t kFreqDomainGpu = 0;           // ZES_FREQ_DOMAIN_GPU

struct DeviceProperties {  // ze_device_properties_t
  std::int32_t stype;
  void* pNext;
  std::int32_t type;
  std::uint32_t vendorId;
  std::uint32_t deviceId;
  std::uint32_t flags;
  std::uint32_t subdeviceId;
  std::uint32_t coreClockRate;  // MHz
  std::uint64_t maxMemAllocSize;
  std::uint32_t maxHardwareContexts;
  std::uint32_t maxCommandQueuePriority;
  std::uint32_t numThreadsPerEU;
  std::uint32_t physicalEUSimdWidth;
  std::uint32_t numEUsPerSubslice;
  std::uint32_t numSubslicesPerSlice;
  std::uint32_t numSlices;
  std::uint64_t timerResolution;
  std::uint32_t timestampValidBits;
  std::uint32_t kernelTimestampValidBits;
  std::uint8_t uuid[16];
  char name[kMaxDeviceName];
};

struct MemoryProperties {  // ze_device_memory_properties_t
  std::int32_t stype;
  void* pNext;
  std::uint32_t flags;
  std::uint32_t maxClockRate;  // MHz
  std::uint32_t maxBusWidth;   // bits
  std::uint64_t totalSize;     // bytes
  char name[kMaxDeviceName];
};

struct PciExtProperties {  // ze_pci_ext_properties_t
  std::int32_t stype;
  void* pNext;
  std::uint32_t domain, bus, device, function;  // ze_pci_address_ext_t
  std::int32_t gen_version, width;               // ze_pci_speed_ext_t
  std::int64_t max_bandwidth;
};

struct EnergyCounter {  // zes_power_energy_counter_t
  std::uint64_t energy;     // microjoules
  std::uint64_t timestamp;  // microseconds
};

struct FreqProperties {  // zes_freq_properties_t
  std::int32_t stype;
  void* pNext;
  std::int32_t type;  // zes_freq_domain_t
  Bool onSubdevice;
  std::uint32_t subdeviceId;
  Bool canControl;
  Bool isThrottleEventSupported;
  double min;  // MHz
  double max;  // MHz
};

struct FreqState {  // zes_freq_state_t
  std::int32_t stype;
  const void* pNext;
  double currentVoltage;
  double request;
  double tdp;
  double efficient;
  double actual;  // MHz; negative when unknown
  std::uint32_t throttleReasons;
};

struct MemState {  // zes_mem_state_t
  std::int32_t stype;
  const void* pNext;
  std::int32_t health;
  std::uint64_t free;  // bytes
  std::uint64_t size;  // bytes
};

static_assert(sizeof(DeviceProperties) == 368);
static_assert(sizeof(MemoryProperties) == 296);
static_assert(sizeof(PciExtProperties) == 48);
static_assert(sizeof(FreqProperties) == 48);
static_assert(sizeof(FreqState) == 64);
static_assert(sizeof(MemState) == 40);

// The entry points, by their Level Zero names.
using InitFn = Result (*)(std::uint32_t flags);                                     // zeInit
using DriverGetFn = Result (*)(std::uint32_t* count, Handle* drivers);              // zeDriverGet
using DeviceGetFn = Result (*)(Handle driver, std::uint32_t* count, Handle* devs);  // zeDeviceGet
using DevicePropertiesFn = Result (*)(Handle device, DeviceProperties*);           // zeDeviceGetProperties
using MemoryPropertiesFn = Result (*)(Handle device, std::uint32_t* count, MemoryProperties*);  // zeDeviceGetMemoryProperties
using PciPropertiesFn = Result (*)(Handle device, PciExtProperties*);              // zeDevicePciGetPropertiesExt
// Sysman, with core device handles (ZES_ENABLE_SYSMAN=1 before zeInit makes them valid).
using EnumFn = Result (*)(Handle device, std::uint32_t* count, Handle* handles);   // zesDeviceEnum*
using TemperatureFn = Result (*)(Handle sensor, double* celsius);                  // zesTemperatureGetState
using EnergyFn = Result (*)(Handle power, EnergyCounter*);                         // zesPowerGetEnergyCounter
using FreqPropertiesFn = Result (*)(Handle domain, FreqProperties*);               // zesFrequencyGetProperties
using FreqStateFn = Result (*)(Handle domain, FreqState*);                         // zesFrequencyGetState
using MemStateFn = Result (*)(Handle module, MemState*);                           // zesMemoryGetState

}  // namespace accelkit::xpu::ze
