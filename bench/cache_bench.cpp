// accelkit_bench_cache: what accelkit::TensorCache saves a data pipeline, on image-like data.
//
// Samples: 3x256x256 uint8 images made of smooth structure (gradients, low-frequency waves,
// soft blobs) plus Gaussian noise (--noise, the standard deviation in grey levels, 2 by
// default), neither all zeros nor pure noise. How well LZ4 compresses them depends mostly on
// that noise (LZ4 finds repeated byte strings, which pixel noise breaks up). There is no image
// codec here: "recompute" is the preprocessing after decoding, from the uint8 image in memory:
// to float, bilinear resize to 224x224 (at::upsample_bilinear2d), normalise with the ImageNet
// mean and std.
//
// Measures, each as the median of --runs passes over all samples after one warm-up pass:
//   (a) per sample: recompute; TensorCache::get of the float32 result; get of a uint8 224x224
//       variant (resized, not normalised), alone and followed by the normalisation; put of each;
//   (b) the compression ratio (raw bytes, header included / file bytes) of both variants, at
//       LZ4's default level and at an LZ4 HC level;
//   (c) LZ4 frame decompression of the entry files held in memory, in GB/s of raw output, with
//       the checksums verified (as the cache reads) and skipped (LZ4 1.9.4's skipChecksums, to
//       show what they cost), against memcpy of the same bytes.
// The entries live in a fresh directory (--dir to choose its parent), read back from the page
// cache: a cold read from the disk is not measured.
//
//   accelkit_bench_cache [--samples N] [--runs R] [--threads T] [--noise S] [--hc-level L] [--dir D] [--json]
#include <lz4.h>
#include <lz4frame.h>
#include <stdlib.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "accelkit/tensor_cache.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Args {
  int samples = 64;
  int runs = 7;
  int threads = 0;    // 0: LibTorch's default
  int hc_level = 9;   // 0: skip the LZ4 HC measurement
  double noise = 2.0;  // standard deviation of the images' noise, in grey levels
  std::string dir = "/tmp";
  bool json = false;
};

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr,
               "%s\nusage: accelkit_bench_cache [--samples N] [--runs R] [--threads T] [--noise S] [--hc-level L] "
               "[--dir D] [--json]\n",
               msg.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value for " + k);
      return argv[++i];
    };
    if (k == "--samples") a.samples = std::stoi(value());
    else if (k == "--runs") a.runs = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--hc-level") a.hc_level = std::stoi(value());
    else if (k == "--noise") a.noise = std::stod(value());
    else if (k == "--dir") a.dir = value();
    else if (k == "--json") a.json = true;
    else if (k == "-h" || k == "--help") usage("");
    else usage("unknown option " + k);
  }
  if (a.samples < 1 || a.runs < 1 || a.threads < 0 || a.hc_level < 0 || a.hc_level > 12 || a.noise < 0)
    usage("bad numbers");
  return a;
}

// A fresh directory under `parent`, removed with its content at the end.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& parent) {
    std::string tmpl = parent + "/accelkit-bench-cache-XXXXXX";
    if (!::mkdtemp(tmpl.data())) usage("cannot create a directory under " + parent);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One image-like sample: smooth structure per channel plus noise, clamped to uint8.
at::Tensor make_image(int i, double noise) {
  const auto f = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor y = at::linspace(0, 1, 256, f).view({256, 1});
  const at::Tensor x = at::linspace(0, 1, 256, f).view({1, 256});
  std::vector<at::Tensor> channels;
  for (int c = 0; c < 3; ++c) {
    const double a = 1.5 + 0.37 * ((i * 7 + c * 3) % 11), b = 2.0 + 0.29 * ((i * 5 + c) % 13);
    const double cx = 0.2 + 0.06 * ((i + c) % 10), cy = 0.3 + 0.05 * ((i * 3 + c) % 9);
    at::Tensor ch = 90 + 60 * x * (c + 1) / 3 + 50 * y * (3 - c) / 3;
    ch = ch + 30 * at::sin(x * a * 6.283 + i) * at::cos(y * b * 6.283 + c);
    ch = ch + 70 * at::exp(-((x - cx).pow(2) + (y - cy).pow(2)) / 0.02);
    channels.push_back(ch);
  }
  const at::Tensor img = at::stack(channels) + at::randn({3, 256, 256}) * noise;
  return img.clamp(0, 255).round().to(at::kByte);
}

const std::vector<int64_t> kOut{224, 224};

at::Tensor resize(const at::Tensor& img_u8) {
  const at::Tensor x = img_u8.to(at::kFloat).unsqueeze(0);
  return at::upsample_bilinear2d(x, at::IntArrayRef(kOut), false).squeeze(0);
}

// ImageNet's mean and std, on values in [0, 255].
at::Tensor normalise(const at::Tensor& x255) {
  static const at::Tensor mean = at::tensor({0.485f * 255, 0.456f * 255, 0.406f * 255}).view({3, 1, 1});
  static const at::Tensor inv_std =
      at::tensor({1.0f / (0.229f * 255), 1.0f / (0.224f * 255), 1.0f / (0.225f * 255)}).view({3, 1, 1});
  return ((x255 - mean) * inv_std).contiguous();
}

at::Tensor preprocess(const at::Tensor& img_u8) { return normalise(resize(img_u8)); }

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;  // per pass
};

// One warm-up pass, then `runs` timed passes.
Timing time_passes(int runs, const std::function<void()>& pass) {
  pass();
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    const auto start = Clock::now();
    pass();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Decompresses whole frames into `out` (sized for each frame's content); returns false on error.
bool decompress_all(LZ4F_dctx* ctx, const std::vector<std::string>& frames, std::vector<std::vector<char>>& out,
                    const LZ4F_decompressOptions_t* options) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    LZ4F_resetDecompressionContext(ctx);
    std::size_t src_pos = 0, dst_pos = 0;
    for (;;) {
      std::size_t dst = out[i].size() - dst_pos, src = frames[i].size() - src_pos;
      const std::size_t r =
          LZ4F_decompress(ctx, out[i].data() + dst_pos, &dst, frames[i].data() + src_pos, &src, options);
      if (LZ4F_isError(r)) return false;
      src_pos += src;
      dst_pos += dst;
      if (r == 0) break;
      if (src == 0 && dst == 0) return false;
    }
  }
  return true;
}

struct Row {
  std::string name;
  Timing t;
  std::uint64_t bytes_per_pass = 0;  // raw bytes a pass produces or reads (0: not a byte path)
};

struct Variant {
  std::string name;
  double ratio = 0;  // raw / file bytes
  std::uint64_t raw = 0, file = 0;
  double lz4_gbs = 0, lz4_unchecked_gbs = 0, memcpy_gbs = 0;  // unchecked: 0 when LZ4 lacks skipChecksums
};

// Ratio and in-memory decompression speed of the entry files in `dir` named by `keys`.
Variant measure_files(const std::string& name, accelkit::TensorCache& cache, const std::vector<std::string>& keys,
                      int runs) {
  Variant v;
  v.name = name;
  std::vector<std::string> frames;
  std::vector<std::vector<char>> out, copy;
  for (const auto& key : keys) {
    frames.push_back(read_file(cache.entry_path(key)));
    LZ4F_dctx* ctx = nullptr;
    LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION);
    LZ4F_frameInfo_t info{};
    std::size_t n = frames.back().size();
    LZ4F_getFrameInfo(ctx, &info, frames.back().data(), &n);
    LZ4F_freeDecompressionContext(ctx);
    out.emplace_back(info.contentSize);
    copy.emplace_back(info.contentSize);
    v.raw += info.contentSize;
    v.file += frames.back().size();
  }
  v.ratio = static_cast<double>(v.raw) / static_cast<double>(v.file);
  LZ4F_dctx* ctx = nullptr;
  LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION);
  bool ok = true;
  const Timing lz4 = time_passes(runs, [&] { ok = ok && decompress_all(ctx, frames, out, nullptr); });
#if LZ4_VERSION_NUMBER >= 10904
  LZ4F_decompressOptions_t unchecked{};
  unchecked.skipChecksums = 1;
  const Timing fast = time_passes(runs, [&] { ok = ok && decompress_all(ctx, frames, out, &unchecked); });
  v.lz4_unchecked_gbs = static_cast<double>(v.raw) / fast.median_s / 1e9;
#endif
  LZ4F_freeDecompressionContext(ctx);
  if (!ok) usage("LZ4 decompression failed on " + cache.dir());
  const Timing mem = time_passes(runs, [&] {
    for (std::size_t i = 0; i < out.size(); ++i) std::memcpy(copy[i].data(), out[i].data(), out[i].size());
  });
  v.lz4_gbs = static_cast<double>(v.raw) / lz4.median_s / 1e9;
  v.memcpy_gbs = static_cast<double>(v.raw) / mem.median_s / 1e9;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  if (args.threads > 0) at::set_num_threads(args.threads);
  at::manual_seed(20260);
  const int n = args.samples;

  std::vector<at::Tensor> images;
  for (int i = 0; i < n; ++i) images.push_back(make_image(i, args.noise));
  std::vector<at::Tensor> floats, bytes;
  for (const auto& img : images) {
    floats.push_back(preprocess(img));
    bytes.push_back(resize(img).round().clamp(0, 255).to(at::kByte));
  }
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back("img" + std::to_string(i));

  ScratchDir scratch(args.dir);
  auto open_cache = [&](const std::string& sub, int level) {
    accelkit::TensorCacheOptions o;
    o.dir = (scratch.path / sub).string();
    o.budget_bytes = 1ull << 40;
    o.compression_level = level;
    return std::make_unique<accelkit::TensorCache>(o);
  };
  auto fcache = open_cache("float32", 0), ucache = open_cache("uint8", 0);
  if (!fcache->enabled()) usage("the cache is off: " + fcache->disabled_reason());

  std::vector<Row> rows;
  const std::uint64_t fbytes = static_cast<std::uint64_t>(floats[0].nbytes()) * n;
  const std::uint64_t ubytes = static_cast<std::uint64_t>(bytes[0].nbytes()) * n;
  rows.push_back({"recompute: uint8 3x256x256 -> float, resize 224, normalise",
                  time_passes(args.runs, [&] {
                    for (const auto& img : images) (void)preprocess(img);
                  }),
                  fbytes});
  rows.push_back({"put float32 3x224x224 (compress, write, fsync, rename)", time_passes(args.runs, [&] {
                    for (int i = 0; i < n; ++i) fcache->put(keys[i], floats[i]);
                  }),
                  fbytes});
  rows.push_back({"put uint8 3x224x224", time_passes(args.runs, [&] {
                    for (int i = 0; i < n; ++i) ucache->put(keys[i], bytes[i]);
                  }),
                  ubytes});
  bool all_hit = true;
  rows.push_back({"get float32 3x224x224", time_passes(args.runs, [&] {
                    for (int i = 0; i < n; ++i) all_hit = fcache->get_tensor(keys[i]).has_value() && all_hit;
                  }),
                  fbytes});
  rows.push_back({"get uint8 3x224x224", time_passes(args.runs, [&] {
                    for (int i = 0; i < n; ++i) all_hit = ucache->get_tensor(keys[i]).has_value() && all_hit;
                  }),
                  ubytes});
  rows.push_back({"get uint8 3x224x224, then to float and normalise", time_passes(args.runs, [&] {
                    for (int i = 0; i < n; ++i) {
                      auto t = ucache->get_tensor(keys[i]);
                      all_hit = t.has_value() && all_hit;
                      if (t) (void)normalise(t->to(at::kFloat));
                    }
                  }),
                  ubytes});
  if (!all_hit) usage("a cache read missed");
  const auto fhit = fcache->get_tensor(keys[0]);
  if (!fhit || !at::equal(*fhit, floats[0])) usage("a cached sample differs from the one written");

  std::vector<Variant> variants{measure_files("float32, LZ4 default", *fcache, keys, args.runs),
                                measure_files("uint8, LZ4 default", *ucache, keys, args.runs)};
  if (args.hc_level > 0) {
    auto fhc = open_cache("float32-hc", args.hc_level), uhc = open_cache("uint8-hc", args.hc_level);
    for (int i = 0; i < n; ++i) {
      fhc->put(keys[i], floats[i]);
      uhc->put(keys[i], bytes[i]);
    }
    const std::string lvl = "LZ4 HC " + std::to_string(args.hc_level);
    variants.push_back(measure_files("float32, " + lvl, *fhc, keys, args.runs));
    variants.push_back(measure_files("uint8, " + lvl, *uhc, keys, args.runs));
  }

  const double per = 1000.0 / n;
  if (args.json) {
    std::printf("{\"samples\": %d, \"runs\": %d, \"threads\": %d, \"noise\": %g, \"rows\": [", n, args.runs,
                at::get_num_threads(), args.noise);
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::printf("%s{\"name\": \"%s\", \"ms_per_sample_median\": %.4f, \"ms_per_sample_min\": %.4f, "
                  "\"ms_per_sample_max\": %.4f, \"raw_mb_per_s\": %.1f}",
                  i ? ", " : "", rows[i].name.c_str(), rows[i].t.median_s * per, rows[i].t.min_s * per,
                  rows[i].t.max_s * per, static_cast<double>(rows[i].bytes_per_pass) / rows[i].t.median_s / 1e6);
    std::printf("], \"files\": [");
    for (std::size_t i = 0; i < variants.size(); ++i)
      std::printf("%s{\"name\": \"%s\", \"raw_bytes\": %llu, \"file_bytes\": %llu, \"ratio\": %.4f, "
                  "\"lz4_decompress_gb_per_s\": %.3f, \"lz4_decompress_unchecked_gb_per_s\": %.3f, "
                  "\"memcpy_gb_per_s\": %.3f}",
                  i ? ", " : "", variants[i].name.c_str(), static_cast<unsigned long long>(variants[i].raw),
                  static_cast<unsigned long long>(variants[i].file), variants[i].ratio, variants[i].lz4_gbs,
                  variants[i].lz4_unchecked_gbs, variants[i].memcpy_gbs);
    std::printf("]}\n");
    return 0;
  }
  std::printf("accelkit_bench_cache: %d samples (image noise sigma %g), %d timed passes after 1 warm-up "
              "(median, min, max), LibTorch intra-op threads %d\n\n",
              n, args.noise, args.runs, at::get_num_threads());
  std::printf("| per sample | median ms | min ms | max ms | samples/s | raw MB/s |\n|---|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows)
    std::printf("| %s | %.3f | %.3f | %.3f | %.0f | %.0f |\n", r.name.c_str(), r.t.median_s * per, r.t.min_s * per,
                r.t.max_s * per, n / r.t.median_s, static_cast<double>(r.bytes_per_pass) / r.t.median_s / 1e6);
  std::printf("\n| entry files | raw bytes | file bytes | ratio | LZ4 decompress GB/s | same, checksums skipped "
              "| memcpy GB/s |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Variant& v : variants) {
    char unchecked[32] = "n/a";
    if (v.lz4_unchecked_gbs > 0) std::snprintf(unchecked, sizeof unchecked, "%.2f", v.lz4_unchecked_gbs);
    std::printf("| %s | %llu | %llu | %.3f | %.2f | %s | %.2f |\n", v.name.c_str(),
                static_cast<unsigned long long>(v.raw), static_cast<unsigned long long>(v.file), v.ratio, v.lz4_gbs,
                unchecked, v.memcpy_gbs);
  }
  std::printf("\n(raw MB/s: bytes of the preprocessed sample per second; ratio: raw bytes, header included, "
              "over file bytes; GB/s: raw output per second, all %d files in memory)\n",
              n);
  return 0;
}
