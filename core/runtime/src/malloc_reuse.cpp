#include "accelkit/runtime/malloc_reuse.hpp"

#include <dlfcn.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "accelkit/base/strings.hpp"
#include "accelkit/runtime.hpp"

namespace accelkit::detail {
namespace {

// The environment's own tuning of glibc's malloc, named ("" where there is none).
std::string environment_tuning(const std::function<const char*(const char*)>& env) {
  std::vector<std::string> found;
  if (const char* t = env("GLIBC_TUNABLES"); t && std::strstr(t, "glibc.malloc.")) found.push_back("GLIBC_TUNABLES=" + std::string(t));
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"})
    if (const char* v = env(name)) found.push_back(std::string(name) + "=" + v);
  return text::join(found, ", ");
}

std::string what_it_does() {
  return "glibc's malloc serves blocks up to " + std::to_string(kMallocReuseMmapThreshold >> 20) +
         " MiB from its heap and keeps up to " + std::to_string(kMallocReuseTrimThreshold >> 30) +
         " GiB free at its top, so each step reuses the last step's memory instead of faulting fresh pages in "
         "(process-wide, for the process's life)";
}

}  // namespace

MallocFacts malloc_in_use() {
  MallocFacts f;
#ifdef __GLIBC__
  Dl_info info{};
  void* (*fn)(std::size_t) = &std::malloc;
  if (dladdr(reinterpret_cast<void*>(fn), &info) != 0 && info.dli_fname != nullptr) {
    f.name = info.dli_fname;
    const std::string base = f.name.substr(f.name.rfind('/') + 1);
    f.glibc = base.rfind("libc.so", 0) == 0;
  } else {
    f.name = "this executable (malloc linked in statically)";
  }
#else
  f.name = "not glibc's C library";
#endif
  return f;
}

MallocReuseChoice choose_malloc_reuse(Toggle want, const std::string& from, bool host_device, const MallocFacts& malloc,
                                      const std::function<const char*(const char*)>& env) {
  MallocReuseChoice c;
  c.value = "off";
  if (want == Toggle::off) {
    c.why = "malloc_reuse = off (from " + from + "): glibc's malloc as the process has it";
    return c;
  }
  if (!malloc.glibc) {
    if (want == Toggle::on)
      throw SettingsError("malloc_reuse = on (from " + from + "): it tunes glibc's malloc, and this process's malloc "
                          "comes from " + malloc.name);
    c.why = "malloc comes from " + malloc.name + ", not glibc: left as it is";
    return c;
  }
  if (want == Toggle::automatic) {
    if (!host_device) {
      c.why = "the device's tensors are not in host memory: glibc's malloc left as it is (on: tune it anyway)";
      return c;
    }
    if (const std::string tuned = environment_tuning(env); !tuned.empty()) {
      c.why = "the environment tunes glibc's malloc already (" + tuned + "): left as it is";
      return c;
    }
  }
  c.apply = true;
  c.value = "on";
  c.why = (want == Toggle::on ? "malloc_reuse = on (from " + from + "): " : std::string()) + what_it_does();
  return c;
}

bool apply_malloc_reuse() {
#ifdef __GLIBC__
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocReuseMmapThreshold)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMallocReuseTrimThreshold)) == 1;
#else
  return false;
#endif
}

}  // namespace accelkit::detail

namespace accelkit {

// Recorded where it changes glibc's malloc, where the setting was given, and where auto found a
// host-memory device but left malloc alone (the reason); on another device auto is only logged.
void Runtime::reuse_freed_memory() {
  const Setting<Toggle>& want = context_->config().malloc_reuse;
  const bool host = torch_device_.is_cpu();
  const detail::MallocReuseChoice c = detail::choose_malloc_reuse(
      *want, want.from(), host, detail::malloc_in_use(), [](const char* name) { return std::getenv(name); });
  const std::string source = *want == Toggle::automatic ? device_->info().id : want.from();
  if (c.apply && !detail::apply_malloc_reuse()) {
    const std::string refused = "glibc refused mallopt(M_MMAP_THRESHOLD, " +
                                std::to_string(detail::kMallocReuseMmapThreshold >> 20) + " MiB)";
    if (*want == Toggle::on) throw SettingsError("malloc_reuse = on (from " + want.from() + "): " + refused);
    decide("malloc_reuse", "off", source, refused + ": its malloc as it was");
    return;
  }
  if (*want == Toggle::automatic && !host) {
    spdlog::debug("malloc_reuse = off: {}", c.why);
    return;
  }
  decide("malloc_reuse", c.value, source, c.why);
}

}  // namespace accelkit
