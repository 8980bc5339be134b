// An on-disk cache of preprocessed samples (one tensor or several), compressed with LZ4, shared
// by the processes that use the same directory: a data pipeline computes a sample once and
// reads it back on later epochs and runs.
//
//   accelkit::TensorCacheOptions o;
//   o.dir = "/data/cache/imagenet-224";
//   o.version = "resize224-norm-v2";  // change it when the preprocessing changes
//   accelkit::TensorCache cache(o);
//   std::vector<at::Tensor> s = cache.get_or_compute(path, [&] { return preprocess(path); });
//
// Entries. One file per (version, key): <dir>/<16 hex digits>.tc, the digits an FNV-1a 64 hash
// of the version's length (u64 little-endian), the version and the key. The file is one LZ4
// frame (block and content checksums, content size recorded) whose content is, integers
// little-endian:
//   "akTCache"  u32 format (1)  u32 M = the length of the metadata that follows
//   metadata: u32 key length, key bytes, u32 version length, version bytes, u32 tensor count,
//             per tensor: u8 dtype code, u8 dims, dims x i64 sizes
//   payload:  each tensor's elements, contiguous, row-major, in the host's byte order
// A read checks everything before it trusts it: the frame's checksums and content size, the
// magic and format, the key and version (a hash collision is a miss, not a hit), the dtype
// codes, sizes whose byte counts add up to the payload exactly, no bytes after the frame.
// An entry that fails any check is removed, reported once (a warning) and counted as corrupt,
// and the read is a miss: bad data is never returned. So is a name that holds a FIFO or an empty
// directory (opened without blocking, never read) or a file larger than max(budget_bytes,
// 1 GiB), which is not read either. A socket cannot be opened: a miss, replaced by the next put.
//
// Writes. A put compresses into a temporary file in the directory (.<name>.tmp-<pid>-<n>),
// fsyncs it and renames it over the entry, then fsyncs the directory: a reader sees the old
// entry or the new one, never part of one, and a writer killed half way leaves only its
// temporary file, which get() never opens. Temporary files untouched for 5 minutes are removed
// by the next scan of the directory (each constructor, and a put that finds the cache over
// budget).
//
// Processes. Renames, evictions and removals run under an exclusive flock on <dir>/.lock. Reads
// take no lock, so that they never wait for a writer: a name only ever changes from one
// complete file to another (rename), and an open file keeps its content whatever is renamed
// over its name or removed. A bad entry is removed under the lock, and only if its name still
// holds the file that was read.
// Several processes and threads may use one directory, or one TensorCache, at once; two
// writers of one key leave one of the two entries, complete.
//
// Budget. The entries' total size (file sizes) is kept in <dir>/.lock by every process; a put
// that takes it over budget_bytes lists the directory and removes the least recently used
// entries (recency: the file's mtime, which put sets and get bumps) until the total is at most
// 90% of the budget. The entry just written is never evicted, even when it alone exceeds the
// budget. Each constructor lists the directory too (and evicts if over budget).
//
// Failures. A directory that cannot be created or written, or a write that fails (a full disk,
// a quota), turns the cache off: one warning per TensorCache, then get() misses and put() does
// nothing; enabled() and disabled_reason() say so. No I/O error escapes as an exception. With
// no `dir` given, a cache root that cannot be used (decision_cache.hpp) turns it off without a
// warning of its own: the root's one warning for the process says why.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace accelkit {

struct TensorCacheOptions {
  // The cache directory, created with its parents if missing. Empty: <cache root>/tensors, the
  // cache root as for the auto-tuner (ACCELKIT_CACHE_DIR, $XDG_CACHE_HOME/accelkit or
  // ~/.cache/accelkit).
  std::string dir;
  // Part of every entry's identity next to the key: a new version never reads an old entry
  // (old ones age out through the budget).
  std::string version = "1";
  // Total size of the entry files to keep (least recently used first out; see Budget above).
  std::uint64_t budget_bytes = 1ull << 30;
  // LZ4: 0 the fast default; 1-2 the same; 3-12 LZ4 HC (smaller, slower to write, decoding as
  // fast); below 0 faster still (LZ4's acceleration), compressing less.
  int compression_level = 0;
  // Where warnings go (disabled cache, bad entry): one line each. Empty: accelkit's logger.
  std::function<void(const std::string&)> warn;
};

class TensorCache {
 public:
  // Never throws for the directory's sake: an unusable one leaves the cache disabled.
  explicit TensorCache(TensorCacheOptions options);
  TensorCache(const TensorCache&) = delete;
  TensorCache& operator=(const TensorCache&) = delete;

  // The sample stored under `key`: fresh contiguous CPU tensors with the stored dtypes and
  // sizes. nullopt on a miss, a disabled cache, or a bad entry (removed, reported once).
  std::optional<std::vector<at::Tensor>> get(const std::string& key);
  // A single-tensor entry; nullopt as for get(), and for an entry that holds another count.
  std::optional<at::Tensor> get_tensor(const std::string& key);

  // Stores `sample` under `key`, replacing what is there. Tensors: defined, strided, on the CPU;
  // any layout of strides (stored contiguous, conjugate and negative views resolved); dtypes
  // float, double, half, bfloat16, int8, uint8, int16, int32, int64, bool, complex float and
  // complex double. Throws std::invalid_argument for anything else (naming the tensor and
  // its device, layout or dtype), whether or not the cache is enabled. An I/O failure disables
  // the cache (see above) instead of throwing.
  void put(const std::string& key, const std::vector<at::Tensor>& sample);
  void put(const std::string& key, const at::Tensor& tensor);

  // get(key), or else compute(), put() its result and return it (the tensors compute returned).
  std::vector<at::Tensor> get_or_compute(const std::string& key,
                                         const std::function<std::vector<at::Tensor>()>& compute);
  at::Tensor get_or_compute_tensor(const std::string& key, const std::function<at::Tensor()>& compute);

  bool enabled() const noexcept { return enabled_.load(std::memory_order_acquire); }
  // Why the cache is off ("" while enabled): the path and the system's reason.
  const std::string& disabled_reason() const noexcept;
  const std::string& dir() const noexcept { return dir_; }
  // The file that holds (or would hold) the entry for `key`.
  std::string entry_path(const std::string& key) const;

  // This object's counters since construction.
  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;                    // corrupt entries included
    std::uint64_t puts = 0;                      // entries written
    std::uint64_t corrupt = 0;                   // bad entries found (and removed)
    std::uint64_t evictions = 0;                 // entries removed for the budget, by this object
    std::uint64_t bytes_on_disk = 0;             // the directory's entry bytes, as of this object's last put or scan
    std::uint64_t bytes_raw_written = 0;         // uncompressed bytes of the entries written (header included)
    std::uint64_t bytes_compressed_written = 0;  // their file sizes
  };
  Stats stats() const;

 private:
  void disable(const std::string& reason);
  void report(const std::string& line) const;
  // Under the directory lock: lists the directory, removes stale temporary files and, over
  // budget, the least recently used entries (never `keep`); returns the entries' total size
  // (also into bytes_on_disk).
  std::uint64_t scan_and_evict(const std::string& keep);
  void drop_bad_entry(const std::string& path, int fd, const std::string& key, const std::string& why);

  TensorCacheOptions options_;
  std::string dir_;
  std::atomic<bool> enabled_{false};
  std::mutex disable_mutex_;
  std::string disabled_reason_;  // written once, before enabled_ turns false
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, puts_{0}, corrupt_{0}, evictions_{0}, bytes_on_disk_{0},
      bytes_raw_written_{0}, bytes_compressed_written_{0};
};

}  // namespace accelkit
