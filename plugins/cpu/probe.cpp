#include "probe.hpp"


#include <accelkit/sdk/host_paths.hpp>

#include "cpuinfo.hpp"
#include "meminfo.hpp"
#include "proc_stat.hpp"
#include "rapl.hpp"
#include "temperature.hpp"
#include "topology.hpp"

namespace accelkit::cpu {

CpuProbe probe_cpu(const CpuidSnapshot& cpuid, const host::FileReader& read) {
  CpuProbe p;

  host::ReadResult cpuinfo_file = read(procfs_path("cpuinfo"));
  if (auto why = host::refusal(procfs_path("cpuinfo"), cpuinfo_file); !why.empty()) p.warnings.push_back(why);
  CpuinfoSummary ci = cpuinfo_file.ok() ? parse_cpuinfo(cpuinfo_file.text) : CpuinfoSummary{};
  p.vendor = vendor_name(!ci.vendor_id.empty() ? ci.vendor_id : cpuid.vendor_id);
  p.model = !ci.model_name.empty() ? ci.model_name : cpuid.brand;
  if (ci.model_name.empty() && !cpuid.brand.empty())
    p.notes.push_back("model from the cpuid brand string (no \"model name\" in cpuinfo)");

  p.isa = decode_isa(cpuid.leaves, cpuid.xcr0);
  for (const std::string& n : p.isa.notes) p.notes.push_back(n);

  // Cores: cpuinfo's (physical id, core id) pairs, else sysfs topology.
  p.logical_cores = ci.logical_cores;
  p.physical_cores = ci.physical_cores;
  p.sockets = ci.sockets;
  if (p.physical_cores == 0 || p.logical_cores == 0) {
    SysfsTopology topo = read_sysfs_topology(read);
    if (p.logical_cores == 0) p.logical_cores = topo.logical_cores;
    if (p.physical_cores == 0 && topo.physical_cores > 0) {
      p.physical_cores = topo.physical_cores;
      p.sockets = topo.sockets;
      p.notes.push_back("physical cores from sysfs topology (cpuinfo has no core ids)");
    }
  }
  if (p.physical_cores == 0 && p.logical_cores > 0) {
    p.physical_cores = p.logical_cores;
    p.notes.push_back("physical cores unknown; assuming one thread per core");
  }
  p.numa_nodes = count_numa_nodes();

  host::ReadResult meminfo = read(procfs_path("meminfo"));
  if (auto why = host::refusal(procfs_path("meminfo"), meminfo); !why.empty()) p.warnings.push_back(why);
  if (meminfo.ok()) {
    const MemInfo m = parse_meminfo(meminfo.text);
    p.memory_bytes = m.total_bytes;
    if (m.total_bytes == 0 && !m.implausible.empty())
      p.notes.push_back("memory unknown: " + m.implausible + " in " + procfs_path("meminfo"));
  }

  p.blas = detect_blas();

  if (auto t = find_temperature_source(read)) p.sensors.temperature = t->description;
  std::vector<RaplDomain> rapl = find_rapl_domains(read);
  if (!rapl.empty()) {
    RaplMeter meter(rapl, read);
    p.sensors.power = meter.source();
    p.sensors.power_readable = true;
    for (const RaplDomain& d : rapl)
      if (!read(d.dir + "/energy_uj").ok()) p.sensors.power_readable = false;
    if (!p.sensors.power_readable)
      p.notes.push_back(p.sensors.power +
                        " energy_uj is not readable (root-only since Linux 5.10): power is n/a");
  }
  host::ReadResult stat = read(procfs_path("stat"));
  p.sensors.utilisation = stat.ok() && parse_proc_stat(stat.text).has_value();
  return p;
}

CpuProbe probe_cpu() { return probe_cpu(read_cpuid_snapshot(), host::read_file); }

}  // namespace accelkit::cpu
