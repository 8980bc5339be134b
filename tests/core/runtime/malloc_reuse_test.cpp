// malloc_reuse (accelkit/runtime/malloc_reuse.hpp): what each setting decides for each device,
// environment and malloc, and, through a Runtime on the CPU plugin, that glibc's malloc then
// serves a block above its own mmap limit (32 MiB) from its heap and keeps it when freed, and
// the CPU device's empty_cache() gives it back.
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include <doctest/doctest.h>

#include "accelkit/runtime/malloc_reuse.hpp"
#include "cpu_runtime.hpp"

namespace malloc_reuse_suite {

using accelkit::SettingsError;
using accelkit::Toggle;
using accelkit::detail::choose_malloc_reuse;
using accelkit::detail::MallocFacts;

namespace {

const MallocFacts kGlibc{true, "/lib/x86_64-linux-gnu/libc.so.6"};
const MallocFacts kJemalloc{false, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"};

// getenv over `vars`.
auto env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// The process's resident set in bytes (/proc/self/statm's second field, in pages).
std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("auto tunes glibc's malloc on a host-memory device whose environment leaves it alone") {
  auto c = choose_malloc_reuse(Toggle::automatic, "default", true, kGlibc, env_of({}));
  CHECK(c.apply);
  CHECK(c.value == "on");
  CHECK(has(c.why, "256 MiB"));
  CHECK(has(c.why, "process-wide"));
  // Tunables of other parts of glibc are no reason to hold back.
  CHECK(choose_malloc_reuse(Toggle::automatic, "default", true, kGlibc,
                            env_of({{"GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F"}}))
            .apply);
}

TEST_CASE("auto leaves malloc alone on another device, under another malloc, or where the environment tunes it") {
  auto gpu = choose_malloc_reuse(Toggle::automatic, "default", false, kGlibc, env_of({}));
  CHECK_FALSE(gpu.apply);
  CHECK(gpu.value == "off");
  CHECK(has(gpu.why, "not in host memory"));
  auto je = choose_malloc_reuse(Toggle::automatic, "default", true, kJemalloc, env_of({}));
  CHECK_FALSE(je.apply);
  CHECK(has(je.why, "libjemalloc.so.2"));
  for (const auto& [name, value] : std::map<std::string, std::string>{{"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"},
                                                                      {"MALLOC_TRIM_THRESHOLD_", "0"},
                                                                      {"MALLOC_MMAP_THRESHOLD_", "65536"}}) {
    auto tuned = choose_malloc_reuse(Toggle::automatic, "default", true, kGlibc, env_of({{name, value}}));
    INFO(name);
    CHECK_FALSE(tuned.apply);
    CHECK(has(tuned.why, name + "=" + value));
  }
}

TEST_CASE("on applies wherever malloc is glibc's and fails loudly where it is not; off never applies") {
  auto on = choose_malloc_reuse(Toggle::on, "ACCELKIT_MALLOC_REUSE", false, kGlibc,
                                env_of({{"MALLOC_TRIM_THRESHOLD_", "0"}}));
  CHECK(on.apply);
  CHECK(has(on.why, "malloc_reuse = on (from ACCELKIT_MALLOC_REUSE)"));
  CHECK_THROWS_WITH_AS(choose_malloc_reuse(Toggle::on, "--malloc-reuse", true, kJemalloc, env_of({})),
                       doctest::Contains("libjemalloc.so.2"), SettingsError);
  auto off = choose_malloc_reuse(Toggle::off, "config.toml", true, kGlibc, env_of({}));
  CHECK_FALSE(off.apply);
  CHECK(has(off.why, "malloc_reuse = off (from config.toml)"));
}

TEST_CASE("this process's malloc is told apart: glibc's unless another is preloaded") {
  const MallocFacts facts = accelkit::detail::malloc_in_use();
  INFO(facts.name);
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::string(preload).find("malloc") != std::string::npos) {
    CHECK_FALSE(facts.glibc);
    return;
  }
  CHECK(facts.glibc);
  CHECK(has(facts.name, "libc.so"));
}

TEST_CASE("a Runtime on the CPU device: recorded, and a 100 MiB block comes from glibc's heap and stays for reuse") {
  if (!accelkit::detail::malloc_in_use().glibc) {
    MESSAGE("skipped: this process's malloc is not glibc's");
    return;
  }
  auto rt = accelkit::test::start_cpu_runtime();
  bool recorded = false;
  for (const auto& d : rt->context().decisions())
    if (d.key == "malloc_reuse") {
      INFO(d.why);
      recorded = true;
      const bool tuned_by_environment = has(d.why, "the environment tunes");
      CHECK(d.value == (tuned_by_environment ? "off" : "on"));
      CHECK(d.source == "cpu:0");
      if (tuned_by_environment) return;
    }
  REQUIRE(recorded);
  // Above glibc's own ceiling for its dynamic mmap threshold (32 MiB): without malloc_reuse
  // such a block is always its own mapping, unmapped again on free.
  constexpr std::size_t kBlock = std::size_t{100} << 20;
  const auto before = mallinfo2();
  void* p = std::malloc(kBlock);
  REQUIRE(p != nullptr);
  std::memset(p, 1, kBlock);  // resident
  const auto during = mallinfo2();
  std::free(p);
  const auto after = mallinfo2();
  CHECK(during.hblks == before.hblks);    // not a mapping of its own
  CHECK(during.hblkhd == before.hblkhd);
  CHECK(after.fordblks >= kBlock);        // free in the heap, kept for the next step
  // The CPU device's empty_cache() gives it back to the system (malloc_trim): the resident set
  // falls by most of the block.
  const auto kept = resident_bytes();
  REQUIRE(rt->device_handle()->empty_cache().is_ok());
  const auto given_back = resident_bytes();
  INFO("resident " << kept << " B with the block kept, " << given_back << " B after empty_cache()");
  CHECK(kept >= given_back + kBlock / 2);
}

}  // namespace malloc_reuse_suite
