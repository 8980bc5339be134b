#include "openblas_kernels.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>

namespace accelkit::cpu {
namespace {

struct KnownSet {
  const char* name;    // as OpenBLAS spells it (OPENBLAS_CORETYPE, openblas_get_corename)
  const char* symbol;  // its exported parameter table
  int rank;
};

// The x86-64 sets worth telling apart; others rank 0 (SSE) like the generic fallbacks.
constexpr KnownSet kKnown[] = {
    {"Prescott", "gotoblas_PRESCOTT", 0},         {"Core2", "gotoblas_CORE2", 0},
    {"Penryn", "gotoblas_PENRYN", 0},             {"Nehalem", "gotoblas_NEHALEM", 0},
    {"Atom", "gotoblas_ATOM", 0},                 {"Barcelona", "gotoblas_BARCELONA", 0},
    {"Sandybridge", "gotoblas_SANDYBRIDGE", 1},   {"Bulldozer", "gotoblas_BULLDOZER", 1},
    {"Piledriver", "gotoblas_PILEDRIVER", 1},     {"Steamroller", "gotoblas_STEAMROLLER", 1},
    {"Excavator", "gotoblas_EXCAVATOR", 2},       {"Haswell", "gotoblas_HASWELL", 2},
    {"Zen", "gotoblas_ZEN", 2},                   {"SkylakeX", "gotoblas_SKYLAKEX", 3},
    {"Cooperlake", "gotoblas_COOPERLAKE", 3},     {"SapphireRapids", "gotoblas_SAPPHIRERAPIDS", 3},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool same_name(const std::string& a, const std::string& b) { return lower(a) == lower(b); }

const KnownSet* find_known(const std::string& name) {
  for (const auto& k : kKnown)
    if (same_name(name, k.name)) return &k;
  return nullptr;
}

bool has(const std::vector<std::string>& v, const std::string& name) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return same_name(s, name); });
}

// OpenBLAS's DYNAMIC_ARCH entry points, from the process's global scope.
struct Api {
  char* (*corename)() = nullptr;
  void (*read_env)() = nullptr;
  void (*dynamic_quit)() = nullptr;
  void (*dynamic_init)() = nullptr;
  std::string missing;  // the first symbol not found; "" = all there
};

template <typename F>
void bind_symbol(F& f, const char* name, std::string& missing) {
  void* p = dlsym(RTLD_DEFAULT, name);
  if (!p && missing.empty()) missing = name;
  f = reinterpret_cast<F>(p);
}

const Api& api() {
  static const Api a = [] {
    Api r;
    bind_symbol(r.corename, "openblas_get_corename", r.missing);
    bind_symbol(r.read_env, "openblas_read_env", r.missing);
    bind_symbol(r.dynamic_quit, "gotoblas_dynamic_quit", r.missing);
    bind_symbol(r.dynamic_init, "gotoblas_dynamic_init", r.missing);
    return r;
  }();
  return a;
}

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

std::string current_locked() {
  const Api& a = api();
  if (!a.missing.empty()) return {};
  const char* name = a.corename();
  return name ? std::string(name) : std::string();
}

// Reloads OpenBLAS's kernel table with OPENBLAS_CORETYPE = `coretype` ("" = unset, the
// library's own pick), then puts the variable back as it was.
void reload_locked(const std::string& coretype) {
  const Api& a = api();
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> saved = env ? std::optional<std::string>(env) : std::nullopt;
  if (coretype.empty()) unsetenv("OPENBLAS_CORETYPE");
  else setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
  a.read_env();
  a.dynamic_quit();
  a.dynamic_init();
  if (saved) setenv("OPENBLAS_CORETYPE", saved->c_str(), 1);
  else unsetenv("OPENBLAS_CORETYPE");
  a.read_env();
}

}  // namespace

int openblas_kernel_rank(const std::string& kernels) {
  const KnownSet* k = find_known(kernels);
  return k ? k->rank : 0;
}

std::string best_openblas_kernels(const IsaFlags& isa, const std::string& vendor,
                                  const std::vector<std::string>& available) {
  std::vector<const char*> order;
  if (isa.avx512f && isa.avx512bw) order.push_back("SkylakeX");
  if (isa.avx2) {
    if (vendor == "AMD") order.push_back("Zen");
    order.push_back("Haswell");
  }
  for (const char* name : order)
    if (has(available, name)) return name;
  return {};
}

BlasKernelPlan plan_openblas_kernels(BlasKernels request, const OpenBlasState& s, const IsaFlags& isa,
                                     const std::string& vendor) {
  BlasKernelPlan plan;
  if (!s.present) {
    plan.reason = "blas kernels: not chosen (" + s.absent_reason + ")";
    return plan;
  }
  const std::string own = "OpenBLAS's own choice, " + s.library_choice;
  if (request == BlasKernels::library) {
    plan.reason = "blas kernels: " + own + " (blas_kernels = library)";
    return plan;
  }
  if (!s.env_coretype.empty()) {
    plan.reason = "blas kernels: " + s.library_choice + " (OPENBLAS_CORETYPE=" + s.env_coretype + " is set: left as is)";
    return plan;
  }
  const std::string best = best_openblas_kernels(isa, vendor, s.kernel_sets);
  const int have = openblas_kernel_rank(s.library_choice);
  if (best.empty() || openblas_kernel_rank(best) <= have) {
    plan.reason = "blas kernels: " + own + " (the widest this CPU runs)";
    return plan;
  }
  static const char* const kIsa[] = {"SSE", "AVX", "AVX2", "AVX-512"};
  plan.kernels = best;
  plan.reason = "blas kernels: " + best + " (" + kIsa[openblas_kernel_rank(best)] + ") instead of " +
                s.library_choice + " (" + kIsa[have] +
                "), which OpenBLAS fell back to on a CPU model it has no entry for; fp32 matmul runs on them";
  return plan;
}

OpenBlasState openblas_state() {
  std::lock_guard<std::mutex> lock(mutex());
  static const OpenBlasState state = [] {
    OpenBlasState s;
    const Api& a = api();
    if (!a.missing.empty()) {
      s.absent_reason = "no OpenBLAS with run-time kernel selection in this process (" + a.missing + " not found)";
      return s;
    }
    s.library_choice = current_locked();
    if (const char* env = std::getenv("OPENBLAS_CORETYPE")) s.env_coretype = env;
    for (const auto& k : kKnown)
      if (dlsym(RTLD_DEFAULT, k.symbol)) s.kernel_sets.emplace_back(k.name);
    s.present = !s.library_choice.empty();
    if (!s.present) s.absent_reason = "OpenBLAS reports no kernel set";
    return s;
  }();
  OpenBlasState now = state;
  now.current = current_locked();
  return now;
}

std::string select_openblas_kernels(const std::string& kernels) {
  const OpenBlasState s = openblas_state();
  if (!s.present) return kernels.empty() ? std::string() : s.absent_reason;  // nothing to undo
  const std::string want = kernels.empty() ? s.library_choice : kernels;
  if (!kernels.empty() && !has(s.kernel_sets, kernels))
    return "OpenBLAS here has no kernel set '" + kernels + "'";
  std::lock_guard<std::mutex> lock(mutex());
  if (same_name(current_locked(), want)) return {};
  reload_locked(kernels.empty() ? s.env_coretype : kernels);
  const std::string now = current_locked();
  if (!same_name(now, want)) return "OpenBLAS runs " + now + " after asking for " + want;
  return {};
}

std::string openblas_current_kernels() {
  std::lock_guard<std::mutex> lock(mutex());
  return current_locked();
}

}  // namespace accelkit::cpu
