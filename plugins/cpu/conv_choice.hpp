// Internal to the CPU plugin's operator kernels (operator_kernels.cpp): which way to compute a
// convolution - LibTorch's own kernel (oneDNN), the plugin's GEMM over its patches
// (conv_gemm.hpp) or, for 3x3 stride-1 layers, its Winograd F(2x2, 3x3) path (conv_winograd.hpp)
// - is the fastest for one shape, found by timing them on the program's own calls.
//
// None wins everywhere. On an AVX-512 Xeon at 2 threads the GEMM path ran pytorch/examples'
// DCGAN discriminator's 128 -> 256 4x4 stride-2 layer (7x7 -> 3x3) about 1.4x as fast as oneDNN,
// forward and backward, and its 64 -> 128 layer (14x14 -> 7x7) no faster, while a ResNet's
// 3x3 layers over 32x32 pixels are oneDNN's. So each shape (sizes, strides, arguments, which
// gradients, thread count) takes its first calls through the paths it fits in turn, each call
// doing the program's real work, and keeps another path than LibTorch's only where its best time
// beats LibTorch's by the margin (the fastest such, where two do; a path far slower after one
// counted call each is dropped at once); the rest of the run takes the kept one. Like cuDNN's
// benchmark mode, but without the extra calls: nothing is computed twice.
//
// A path other than LibTorch's, once kept, is checked again later in the run: on a VM whose
// layer times moved by 10-20% between rounds (an AVX2 EPYC, LibTorch 1.13), more than the
// margin, a choice timed on a shape's first calls kept the GEMM path for pytorch/examples' DCGAN
// discriminator's 128 -> 256 forward and its generator's 256 -> 128 backward, which LibTorch's
// kernel ran faster in every later round. So after kRecheckAfter calls by the kept path the
// shape takes a second round of trials, timed as the first, whose choice is for good; LibTorch's
// kernel, once kept, stays (a missed gain, never a slower layer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace accelkit::cpu::conv_choice {

enum class Path : std::uint8_t { libtorch, gemm, winograd };
inline constexpr int kPaths = 3;

// A set of paths, one bit each.
using Paths = std::uint8_t;
constexpr Paths bit(Path p) { return static_cast<Paths>(1u << static_cast<unsigned>(p)); }

// What one call of a shape does: the path kept, or a trial of one (to be timed and recorded).
struct Turn {
  Path path = Path::libtorch;
  bool trial = false;
};

// A shape: every number that can change either path's time (built by the caller).
using Key = std::vector<std::int64_t>;

struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept;
};

class Table {
 public:
  // Calls of each path before the choice; the first of each is a warm-up (fresh memory, cold
  // caches, oneDNN's primitive made) and not counted.
  static constexpr int kTrials = 4;
  // Another path is kept where its best time is below this fraction of LibTorch's best.
  static constexpr double kMargin = 0.9;
  // Where another path's first counted call took more than this times LibTorch's, it is timed no
  // more (the GEMM path on a ResNet's 3x3 layers: 2-3x); with none left, LibTorch's is kept.
  static constexpr double kEarlyOut = 1.5;
  // Calls by a kept path other than LibTorch's before its second round of trials.
  static constexpr int kRecheckAfter = 16;
  // Shapes the table holds; calls of further shapes take LibTorch's kernel untimed.
  static constexpr std::size_t kMaxShapes = 4096;

  // The next call of this shape: trials take LibTorch's kernel and each of the `others` paths
  // in turn (LibTorch's first; `others` as given on the shape's first call), then the kept path;
  // a kept path's kRecheckAfter-th call other than LibTorch's starts the second round.
  Turn next(const Key& key, Paths others = bit(Path::gemm));
  // A trial's time in milliseconds.
  void record(const Key& key, Path path, double ms);

  struct Counts {
    std::size_t gemm = 0, winograd = 0, libtorch = 0, trying = 0;  // shapes decided each way, and undecided
    std::size_t confirmed = 0;  // of those, shapes a second round kept on another path than LibTorch's
    std::size_t dropped = 0;    // and shapes it took back to LibTorch's
  };
  Counts counts() const;

 private:
  struct Entry {
    Paths paths = 0;     // the shape's paths, LibTorch's included
    Paths timing = 0;    // those still timed this round
    int issued[kPaths] = {};  // trial turns handed out, each path
    int cursor = 0;      // the path whose turn is next, if it is still timed
    std::vector<double> times[kPaths];
    bool decided = false;
    Path kept = Path::libtorch;
    int round = 0;       // 0: the first trials; 1: the second, for a kept path other than LibTorch's
    int kept_calls = 0;  // calls by that kept path since the first round decided
  };
  static Entry fresh(Paths paths, int round);
  mutable std::mutex mu_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
};

}  // namespace accelkit::cpu::conv_choice
