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

Table::Entry Table::fresh(Paths paths, int round) {
  Entry e;
  e.paths = e.timing = paths;
  e.round = round;
  return e;
}

Turn Table::next(const Key& key, Paths others) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxShapes) return {Path::libtorch, false};
    it = entries_.emplace(key, fresh(static_cast<Paths>(bit(Path::libtorch) | others), 0)).first;
  }
  Entry& e = it->second;
  if (e.decided) {
    if (e.kept == Path::libtorch || e.round > 0 || ++e.kept_calls < kRecheckAfter) return {e.kept, false};
    e = fresh(e.paths, 1);  // the second round: the first's trials again, from fresh times
  }
  // The next path in turn with trials left; past the trials (callers on other threads still
  // timing theirs), LibTorch's kernel, untimed.
  for (int k = 0; k < kPaths; ++k) {
    const int i = (e.cursor + k) % kPaths;
    if ((e.timing & bit(static_cast<Path>(i))) == 0 || e.issued[i] >= kTrials) continue;
    ++e.issued[i];
    e.cursor = (i + 1) % kPaths;
    return {static_cast<Path>(i), true};
  }
  return {Path::libtorch, false};
}

namespace {

// The best of a path's timed calls after its warm-up.
double best(const std::vector<double>& t) { return *std::min_element(t.begin() + 1, t.end()); }

}  // namespace

void Table::record(const Key& key, Path path, double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.decided) return;  // a late trial of a decided round
  Entry& e = it->second;
  e.times[static_cast<int>(path)].push_back(ms);
  const auto& lib = e.times[static_cast<int>(Path::libtorch)];
  if (lib.size() < 2) return;  // a warm-up and a counted call, at least
  const double best_lib = best(lib);
  bool done = static_cast<int>(lib.size()) >= kTrials;
  for (const Path p : {Path::gemm, Path::winograd}) {
    if ((e.timing & bit(p)) == 0) continue;
    const auto& t = e.times[static_cast<int>(p)];
    if (t.size() < 2) {
      done = false;
    } else if (best(t) > kEarlyOut * best_lib) {
      e.timing = static_cast<Paths>(e.timing & ~bit(p));  // far slower: timed no more
    } else if (static_cast<int>(t.size()) < kTrials) {
      done = false;
    }
  }
  if (e.timing != bit(Path::libtorch) && !done) return;
  // The fastest path past the margin, or LibTorch's.
  Path kept = Path::libtorch;
  double kept_best = kMargin * best_lib;
  for (const Path p : {Path::gemm, Path::winograd}) {
    if ((e.timing & bit(p)) == 0) continue;
    const double b = best(e.times[static_cast<int>(p)]);
    if (b < kept_best) {
      kept = p;
      kept_best = b;
    }
  }
  e.kept = kept;
  e.decided = true;
}

Table::Counts Table::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c;
  for (const auto& [key, e] : entries_) {
    if (e.round > 0 && e.decided) ++(e.kept != Path::libtorch ? c.confirmed : c.dropped);
    if (!e.decided)
      ++c.trying;
    else if (e.kept == Path::gemm)
      ++c.gemm;
    else if (e.kept == Path::winograd)
      ++c.winograd;
    else
      ++c.libtorch;
  }
  return c;
}

}  // namespace accelkit::cpu::conv_choice
