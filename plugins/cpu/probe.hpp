// What the CPU plugin learns about the machine: identity, ISA, cores, NUMA, memory, BLAS and
// which sensors exist. Torch-free and cheap (a few file reads, no timing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blas.hpp"
#include "cpuid.hpp"
#include "accelkit/sdk/support/host_file.hpp"
#include "isa.hpp"

namespace accelkit::cpu {

struct CpuSensors {
  std::string temperature;  // source description; "" = none
  std::string power;        // "RAPL package-0"; "" = none
  bool power_readable = false;  // false when energy_uj exists but is root-only
  bool utilisation = false;     // /proc/stat has an aggregate cpu line
};

struct CpuProbe {
  std::string vendor;  // "Intel", "AMD"; "" when unknown
  std::string model;   // "AMD Ryzen 9 7950X 16-Core Processor"; "" when unknown
  IsaFlags isa;
  int logical_cores = 0;   // 0 = unknown
  int physical_cores = 0;  // 0 = unknown
  int sockets = 0;         // 0 = unknown
  int numa_nodes = 0;      // 0 = the kernel shows no NUMA information
  std::uint64_t memory_bytes = 0;  // MemTotal; 0 = unknown
  BlasInfo blas;
  CpuSensors sensors;
  // LibTorch's quantized engines in this build, lower-cased ("x86", "fbgemm", "onednn",
  // "qnnpack"): what int8 Linear can run on. Filled by the plugin (LibTorch glue).
  std::vector<std::string> quantized_engines;
  std::vector<std::string> notes;  // facts worth showing (where a value came from, ISA caveats)
  std::vector<std::string> warnings;  // host files that could not be read, and why
};

// Probes with the given cpuid values and file reader (for tests); files come from
// sysfs_path()/procfs_path().
CpuProbe probe_cpu(const CpuidSnapshot& cpuid, const host::FileReader& read);

// Probes this machine.
CpuProbe probe_cpu();

}  // namespace accelkit::cpu
