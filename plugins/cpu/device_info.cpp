#include "device_info.hpp"

#include <algorithm>
#include <cstdio>

namespace accelkit::cpu {
namespace {
std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}
std::string count(int n) { return n > 0 ? std::to_string(n) : "unknown"; }
}  // namespace

std::string bf16_source(const IsaFlags& isa) {
  if (isa.amx_bf16) return "AMX-BF16";
  if (isa.avx512_bf16) return "AVX512_BF16";
  return {};
}

Int8Choice choose_int8(const std::vector<std::string>& engines, const IsaFlags& isa) {
  Int8Choice c;
  auto has = [&](const char* e) { return std::find(engines.begin(), engines.end(), e) != engines.end(); };
  // x86 (2.0+) dispatches between FBGEMM and oneDNN per shape; then FBGEMM; then oneDNN.
  // QNNPACK targets ARM: on x86 its dynamic Linear measured ~10x slower than the others.
  for (const char* e : {"x86", "fbgemm", "onednn"})
    if (has(e)) {
      c.engine = e;
      break;
    }
  std::string list;
  for (const auto& e : engines) list += (list.empty() ? "" : ", ") + e;
  if (c.engine.empty()) {
    c.why = engines.empty() ? "no int8 Linear: this LibTorch has no quantized engine"
                            : "no int8 Linear: LibTorch's quantized engines here (" + list +
                                  ") are for ARM; x86, fbgemm or onednn is needed";
    return c;
  }
  // Without VNNI, the int8 GEMMs of FBGEMM and oneDNN alike multiply u8 by s8 with vpmaddubsw,
  // whose 16-bit pair sums saturate unless activations keep 7 bits (measured on an AVX2-only
  // Zen 4 with LibTorch 1.13's oneDNN engine: 8-bit activations gave 12% relative error on a
  // 3 x Linear(256) stack, cosine 0.992). VNNI accumulates in 32 bits; every CPU with
  // AVX512_BF16 or AMX has it (one with VNNI alone is treated as without: 7 bits, safe).
  c.reduce_range = !isa.bf16_native();
  c.why = "int8 Linear: LibTorch's " + c.engine + " quantized engine (of " + list + "), activations " +
          (c.reduce_range ? "in 7 bits (no VNNI-class int8 dot product: 16-bit sums would saturate)" : "in 8 bits");
  return c;
}

CpuReport make_cpu_report(const CpuProbe& p) {
  CpuReport r;
  r.score = kCpuScore;
  DeviceInfo& d = r.device;
  d.id = "cpu:0";
  d.torch_device = "cpu";
  d.name = p.model.empty() ? "CPU" : p.model;
  d.vendor = p.vendor;
  d.kind = DeviceKind::cpu;
  d.memory_bytes = p.memory_bytes;
  d.cores = p.physical_cores > 0 ? static_cast<std::uint32_t>(p.physical_cores) : 0;

  const std::string isa = isa_list(p.isa);
  const std::string bf16 = bf16_source(p.isa);
  CapabilitySet& caps = d.capabilities;
  caps.add(Capability::fp32);
  caps.add(Capability::fused_adamw);
  caps.add(Capability::fused_sgd);
  caps.add(Capability::master_weights);
  caps.add(Capability::memory_stats);  // the process's resident set and its peak
  if (!bf16.empty()) caps.add(Capability::bf16);
  if (!p.sensors.temperature.empty()) caps.add(Capability::thermal);
  if (!p.sensors.power.empty() && p.sensors.power_readable) caps.add(Capability::power);
  if (p.sensors.utilisation) caps.add(Capability::utilisation);
  const Int8Choice int8 = choose_int8(p.quantized_engines, p.isa);
  if (!int8.engine.empty()) {
    caps.add(Capability::int8_linear);
    caps.set(kInt8EngineKey, int8.engine);
    caps.set(kInt8ReduceRangeKey, int8.reduce_range ? "true" : "false");
  }
  // The vector width in elements: AVX-512 holds 16 fp32, 32 bf16, 64 int8; AVX2 half that.
  const int fp32_lanes = p.isa.avx512f ? 16 : p.isa.avx2 ? 8 : 4;
  caps.set(std::string(kAlignPrefix) + "fp32", std::to_string(fp32_lanes));
  caps.set(std::string(kAlignPrefix) + "bf16", std::to_string(2 * fp32_lanes));
  caps.set(std::string(kAlignPrefix) + "int8", std::to_string(4 * fp32_lanes));
  caps.set("isa", isa);
  for (const auto& [name, on] : isa_entries(p.isa))
    if (on) caps.set(name, "true");
  if (p.blas.kind != BlasKind::not_found) caps.set("blas", p.blas.name);
  caps.set(kCollectivesKey, "gloo");  // c10d's Gloo, inside libtorch_cpu

  auto& props = d.properties;
  props.emplace_back("vendor", p.vendor.empty() ? "unknown" : p.vendor);
  props.emplace_back("physical cores", count(p.physical_cores));
  props.emplace_back("logical cores", count(p.logical_cores));
  props.emplace_back("sockets", count(p.sockets));
  props.emplace_back("NUMA nodes", count(p.numa_nodes));
  props.emplace_back("memory", p.memory_bytes ? gib(p.memory_bytes) : "unknown");
  props.emplace_back("isa", isa.empty() ? "none of avx2/avx512f/avx512bw/avx512_bf16/amx_bf16" : isa);
  props.emplace_back("blas", p.blas.kind == BlasKind::not_found
                                 ? "not visible (statically linked into LibTorch, or not loaded)"
                                 : p.blas.name + " (" + p.blas.path + ")");
  props.emplace_back("temperature sensor", p.sensors.temperature.empty() ? "none" : p.sensors.temperature);
  props.emplace_back("power sensor", p.sensors.power.empty()      ? "none"
                                     : p.sensors.power_readable ? p.sensors.power
                                                                : p.sensors.power + " (not readable: root-only)");
  for (const std::string& n : p.notes) props.emplace_back("note", n);

  r.reasons.push_back("CPU is always usable: " + count(p.physical_cores) + " physical / " +
                      count(p.logical_cores) + " logical cores");
  r.reasons.push_back(!bf16.empty() ? "bf16 is native (" + bf16 + ")"
                                    : "no AVX512_BF16 or AMX-BF16: fp32 is the fast dtype");
  r.reasons.push_back(int8.why);
  if (!p.blas.warning.empty()) {
    d.warnings.push_back(p.blas.warning);
    r.warnings.push_back(p.blas.warning);
  }
  for (const std::string& w : p.warnings) {
    d.warnings.push_back(w);
    r.warnings.push_back(w);
  }
  return r;
}

}  // namespace accelkit::cpu
