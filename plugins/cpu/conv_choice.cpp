// The per-shape choice between LibTorch's convolution kernel and the GEMM path (conv_choice.hpp).
#include "conv_choice.hpp"

#include <algorithm>

namespace accelkit::cpu::conv_choice {

std::size_t KeyHash::operator()(const Key& k) const noexcept {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the numbers' bytes
  for (const std::int64_t v : k) {
    auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i, u >>= 8) h = (h ^ (u & 0xff)) * 1099511628211ull;
  }
  return static_cast<std::size_t>(h);
}

Turn Table::next(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxShapes) return {Path::libtorch, false};
    it = entries_.emplace(key, Entry{}).first;
  }
  Entry& e = it->second;
  if (e.decided) {
    if (e.kept != Path::gemm || e.round > 0 || ++e.kept_calls < kRecheckAfter) return {e.kept, false};
    // The second round: the first's trials again, from fresh times.
    e = Entry{};
    e.round = 1;
  }
  // Turns past the trials (callers on other threads still timing theirs) take LibTorch's.
  if (e.issued >= 2 * kTrials) return {Path::libtorch, false};
  const Path p = e.issued % 2 == 0 ? Path::libtorch : Path::gemm;
  ++e.issued;
  return {p, true};
}

void Table::record(const Key& key, Path path, double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.decided) return;  // a late trial of a decided round
  Entry& e = it->second;
  e.times[static_cast<int>(path)].push_back(ms);
  const auto& lib = e.times[static_cast<int>(Path::libtorch)];
  const auto& gemm = e.times[static_cast<int>(Path::gemm)];
  if (lib.size() < 2 || gemm.size() < 2) return;  // a warm-up and a counted call each, at least
  // The best of each path's timed calls after its warm-up.
  const double best_lib = *std::min_element(lib.begin() + 1, lib.end());
  const double best_gemm = *std::min_element(gemm.begin() + 1, gemm.end());
  const bool done = static_cast<int>(lib.size()) >= kTrials && static_cast<int>(gemm.size()) >= kTrials;
  if (!done && best_gemm <= kEarlyOut * best_lib) return;
  e.kept = done && best_gemm < kMargin * best_lib ? Path::gemm : Path::libtorch;
  e.decided = true;
}

Table::Counts Table::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c;
  for (const auto& [key, e] : entries_) {
    if (e.round > 0 && e.decided) ++(e.kept == Path::gemm ? c.confirmed : c.dropped);
    if (!e.decided)
      ++c.trying;
    else if (e.kept == Path::gemm)
      ++c.gemm;
    else
      ++c.libtorch;
  }
  return c;
}

}  // namespace accelkit::cpu::conv_choice
