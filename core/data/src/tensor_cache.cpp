#include "accelkit/tensor_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <lz4frame.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "accelkit/decision_cache.hpp"

namespace accelkit {

namespace {

constexpr char kTcMagic[8] = {'a', 'k', 'T', 'C', 'a', 'c', 'h', 'e'};
constexpr std::uint32_t kTcFormat = 1;
constexpr std::size_t kTcPrefixBytes = 16;          // magic, format, metadata length
constexpr std::uint32_t kTcMaxMeta = 64u << 20;     // no real sample's metadata comes near
constexpr std::int64_t kTcMaxDims = 64;
constexpr std::size_t kTcSlice = 1u << 20;          // input per LZ4F_compressUpdate call
constexpr std::size_t kTcFlushAt = 1u << 20;        // compressed bytes gathered before a write()
constexpr std::time_t kTcStaleTempSeconds = 300;    // a temporary file untouched this long: its writer is gone
constexpr std::uint64_t kTcReadFloor = 1ull << 30;  // get() reads entry files up to max(budget, this)
// LZ4 expands a compressed block at most ~255 times; a frame claiming more content per byte of
// file is not one this cache wrote (and must not make a read allocate that much).
constexpr std::uint64_t kTcMaxExpansion = 512;
constexpr char kTcSizeMagic[8] = {'a', 'k', 'T', 'C', 's', 'i', 'z', 'e'};

// Codes of the dtypes an entry may hold: this format's own, stable whatever LibTorch numbers
// its ScalarType values.
struct TcDtype {
  std::uint8_t code;
  c10::ScalarType type;
  std::size_t size;
};
constexpr TcDtype kTcDtypes[] = {
    {1, c10::ScalarType::Byte, 1},           {2, c10::ScalarType::Char, 1},  {3, c10::ScalarType::Short, 2},
    {4, c10::ScalarType::Int, 4},            {5, c10::ScalarType::Long, 8},  {6, c10::ScalarType::Half, 2},
    {7, c10::ScalarType::Float, 4},          {8, c10::ScalarType::Double, 8}, {9, c10::ScalarType::ComplexFloat, 8},
    {10, c10::ScalarType::ComplexDouble, 16}, {11, c10::ScalarType::Bool, 1}, {12, c10::ScalarType::BFloat16, 2},
};

const TcDtype* tc_dtype_of(c10::ScalarType type) {
  for (const auto& d : kTcDtypes)
    if (d.type == type) return &d;
  return nullptr;
}

const TcDtype* tc_dtype_of_code(std::uint8_t code) {
  for (const auto& d : kTcDtypes)
    if (d.code == code) return &d;
  return nullptr;
}

std::string tc_strerror(int err) { return std::system_category().message(err); }

std::string tc_lz4_error(std::size_t code) { return std::string("LZ4: ") + LZ4F_getErrorName(code); }

// FNV-1a 64: stable across builds and platforms, unlike std::hash.
std::uint64_t tc_fnv1a(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// <16 hex digits>.tc from the version and the key (the version's length first, so that no
// other split of the same bytes gives the same name input).
std::string tc_entry_name(const std::string& version, const std::string& key) {
  unsigned char len[8];
  std::uint64_t n = version.size();
  for (unsigned char& b : len) {
    b = static_cast<unsigned char>(n & 0xff);
    n >>= 8;
  }
  std::uint64_t h = 0xcbf29ce484222325ull;
  h = tc_fnv1a(h, len, sizeof len);
  h = tc_fnv1a(h, version.data(), version.size());
  h = tc_fnv1a(h, key.data(), key.size());
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx.tc", static_cast<unsigned long long>(h));
  return buf;
}

bool tc_is_entry_name(const char* name) {
  const std::size_t n = std::strlen(name);
  if (n != 19 || std::strcmp(name + 16, ".tc") != 0) return false;
  return std::all_of(name, name + 16, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// .<entry name>.tmp-<pid>-<n>, as put() names its temporary files.
bool tc_is_temp_name(const char* name) { return name[0] == '.' && std::strstr(name, ".tc.tmp-") != nullptr; }

timespec tc_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}

// Sets a file's access and modification times to now, to the nanosecond (the kernel's own
// timestamps are only as fine as its clock tick, too coarse to order entries written in a row).
void tc_touch(int fd) {
  const timespec now = tc_now();
  const timespec times[2] = {now, now};
  (void)::futimens(fd, times);  // recency is best effort: a file the process may not touch still reads
}

// Little-endian unsigned integers of any width, appended to `out`.
template <typename T>
void tc_put_le(std::string& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void tc_put_u32(std::string& out, std::uint32_t v) { tc_put_le(out, v); }
void tc_put_u64(std::string& out, std::uint64_t v) { tc_put_le(out, v); }

// Reads the little-endian fields of a header held in memory, never past its end.
struct TcReader {
  const unsigned char* p;
  std::size_t left;

  template <typename T>
  bool le(T& v) {
    if (left < sizeof(T)) return false;
    v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>(v | static_cast<T>(static_cast<T>(p[i]) << (8 * i)));
    p += sizeof(T);
    left -= sizeof(T);
    return true;
  }
  bool u8(std::uint8_t& v) { return le(v); }
  bool u32(std::uint32_t& v) { return le(v); }
  bool u64(std::uint64_t& v) { return le(v); }
  bool text(std::string& s) {
    std::uint32_t n = 0;
    if (!u32(n) || n > left) return false;
    s.assign(reinterpret_cast<const char*>(p), n);
    p += n;
    left -= n;
    return true;
  }
};

struct TcFd {
  int fd = -1;
  explicit TcFd(int f) : fd(f) {}
  ~TcFd() {
    if (fd >= 0) ::close(fd);
  }
  TcFd(const TcFd&) = delete;
  TcFd& operator=(const TcFd&) = delete;
};

struct TcCctxFree {
  void operator()(LZ4F_cctx* c) const { LZ4F_freeCompressionContext(c); }
};
struct TcDctxFree {
  void operator()(LZ4F_dctx* c) const { LZ4F_freeDecompressionContext(c); }
};

// The directory's lock, held exclusively while it lives: around renames into the directory,
// evictions and removals. A descriptor of its own each time, so that threads of one process
// (and a forked child holding the parent's descriptors) exclude one another as processes do.
//
// The lock file also holds the entries' total size ("akTCsize", u64 little-endian), kept by
// every process under the lock, so that a put knows whether the directory is over budget
// without listing it. It is a hint: a scan of the directory recomputes it (when it says over
// budget, and in each constructor), so a writer killed between its rename and the update, or
// an entry removed by hand, is corrected there.
class TcDirLock {
 public:
  explicit TcDirLock(const std::string& dir) : path_(dir + "/.lock") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      error_ = "cannot open the lock file " + path_ + ": " + tc_strerror(errno);
      return;
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      error_ = "cannot lock " + path_ + ": " + tc_strerror(errno);
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  ~TcDirLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  TcDirLock(const TcDirLock&) = delete;
  TcDirLock& operator=(const TcDirLock&) = delete;
  bool held() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }

  std::optional<std::uint64_t> total() const {
    unsigned char b[16];
    if (::pread(fd_, b, sizeof b, 0) != static_cast<ssize_t>(sizeof b) || std::memcmp(b, kTcSizeMagic, 8) != 0)
      return std::nullopt;
    TcReader r{b + 8, 8};
    std::uint64_t v = 0;
    r.u64(v);
    return v;
  }
  void set_total(std::uint64_t v) const {
    std::string b(kTcSizeMagic, 8);
    tc_put_u64(b, v);
    (void)!::pwrite(fd_, b.data(), b.size(), 0);  // a hint: a failed write only costs a scan later
  }

 private:
  std::string path_;
  std::string error_;
  int fd_ = -1;
};

// Takes the content of an LZ4 frame held in memory, piece by piece, into the caller's buffers.
struct TcInflater {
  LZ4F_dctx* ctx;
  const unsigned char* src;
  std::size_t size;
  std::size_t pos;
  std::string error;
  bool ended = false;  // LZ4F_decompress said the frame is complete (checksum verified)

  bool read(void* dst, std::size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    std::size_t done = 0;
    while (done < n) {
      if (ended) {
        error = "the frame holds less content than its header describes";
        return false;
      }
      std::size_t dst_size = n - done, src_size = size - pos;
      const std::size_t r = LZ4F_decompress(ctx, out + done, &dst_size, src + pos, &src_size, nullptr);
      if (LZ4F_isError(r)) {
        error = tc_lz4_error(r);
        return false;
      }
      pos += src_size;
      done += dst_size;
      ended = r == 0;
      if (done < n && !ended && src_size == 0 && dst_size == 0) {
        error = "truncated: the file ends early";
        return false;
      }
    }
    return true;
  }

  // Reads the rest of the frame (its end mark and content checksum): no content may be left.
  bool finish() {
    unsigned char scratch[64];
    while (!ended) {
      std::size_t dst_size = sizeof scratch, src_size = size - pos;
      const std::size_t r = LZ4F_decompress(ctx, scratch, &dst_size, src + pos, &src_size, nullptr);
      if (LZ4F_isError(r)) {
        error = tc_lz4_error(r);
        return false;
      }
      pos += src_size;
      if (dst_size != 0) {
        error = "the frame holds more content than its header describes";
        return false;
      }
      ended = r == 0;
      if (!ended && src_size == 0) {
        error = "truncated: the frame's end is missing";
        return false;
      }
    }
    if (pos != size) {
      error = std::to_string(size - pos) + " bytes after the LZ4 frame";
      return false;
    }
    return true;
  }
};

struct TcDecoded {
  std::vector<at::Tensor> tensors;
  std::string problem;     // a bad entry: why
  bool other_key = false;  // a valid entry of another key or version (a hash collision)
};

// One tensor as the metadata describes it.
struct TcSpec {
  const TcDtype* dtype;
  std::vector<std::int64_t> sizes;
  std::uint64_t bytes;
};

// The frame's own header: an LZ4 frame with block and content checksums whose content size is
// plausible for a file of `size` bytes. "" when it is, else why not; `consumed` gets the
// header's length, `content` the content size.
std::string tc_frame_problem(LZ4F_dctx* ctx, const unsigned char* src, std::size_t size, std::size_t& consumed,
                             std::uint64_t& content) {
  LZ4F_frameInfo_t info{};
  consumed = size;
  const std::size_t r = LZ4F_getFrameInfo(ctx, &info, src, &consumed);
  if (LZ4F_isError(r)) return "not an LZ4 frame (" + tc_lz4_error(r) + ")";
  if (info.frameType != LZ4F_frame) return "an LZ4 skippable frame, not an entry";
  if (info.contentChecksumFlag != LZ4F_contentChecksumEnabled || info.blockChecksumFlag != LZ4F_blockChecksumEnabled)
    return "an LZ4 frame without block and content checksums";
  content = info.contentSize;
  if (content < kTcPrefixBytes) return "its LZ4 frame records a content size of " + std::to_string(content);
  if (content / kTcMaxExpansion > size)
    return "its LZ4 frame claims " + std::to_string(content) + " bytes of content in a file of " + std::to_string(size);
  return {};
}

// The prefix (magic, format, metadata length) and the metadata after it, into `meta`. "" or why not.
std::string tc_read_meta(TcInflater& in, std::uint64_t content, std::vector<unsigned char>& meta) {
  unsigned char prefix[kTcPrefixBytes];
  if (!in.read(prefix, sizeof prefix)) return in.error;
  if (std::memcmp(prefix, kTcMagic, sizeof kTcMagic) != 0) return "not a tensor cache entry (bad magic)";
  TcReader pr{prefix + sizeof kTcMagic, sizeof prefix - sizeof kTcMagic};
  std::uint32_t format = 0, meta_len = 0;
  pr.u32(format);
  pr.u32(meta_len);
  if (format != kTcFormat) return "entry format " + std::to_string(format) + ", expected " + std::to_string(kTcFormat);
  if (meta_len > kTcMaxMeta || kTcPrefixBytes + meta_len > content)
    return "metadata of " + std::to_string(meta_len) + " bytes in " + std::to_string(content) + " bytes of content";
  meta.resize(meta_len);
  if (!in.read(meta.data(), meta.size())) return in.error;
  return {};
}

// Tensor `i`'s dtype and sizes, with the bytes its values take: `payload` of the entry's
// `payload_room` bytes are taken by the tensors before it. "" or why not.
std::string tc_read_spec(TcReader& mr, std::uint32_t i, std::uint64_t payload_room, std::uint64_t payload, TcSpec& s) {
  std::uint8_t code = 0, dims = 0;
  if (!mr.u8(code) || !mr.u8(dims)) return "truncated metadata";
  s = TcSpec{tc_dtype_of_code(code), {}, 0};
  if (!s.dtype) return "tensor " + std::to_string(i) + " has the unknown dtype code " + std::to_string(code);
  if (dims > kTcMaxDims) return "tensor " + std::to_string(i) + " has " + std::to_string(dims) + " dimensions";
  // The product of the nonzero sizes must fit an int64 (as LibTorch's numel), even for an
  // empty tensor.
  std::uint64_t nonzero = 1;
  bool empty = false;
  for (std::uint8_t d = 0; d < dims; ++d) {
    std::uint64_t v = 0;
    if (!mr.u64(v)) return "truncated metadata";
    if (v == 0) {
      empty = true;
    } else if (v > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(nonzero, v, &nonzero) ||
               nonzero > static_cast<std::uint64_t>(INT64_MAX)) {
      return "tensor " + std::to_string(i) + " has sizes whose product overflows";
    }
    s.sizes.push_back(static_cast<std::int64_t>(v));
  }
  const std::uint64_t numel = empty ? 0 : nonzero;
  if (numel > payload_room / s.dtype->size || numel * s.dtype->size > payload_room - payload)
    return "tensor sizes add up to more than the entry's " + std::to_string(payload_room) + " payload bytes";
  s.bytes = numel * s.dtype->size;
  return {};
}

// The tensors' specs after the key, version and count: they must take exactly the entry's
// `payload_room` bytes, and the metadata must end with them. "" or why not.
std::string tc_read_specs(TcReader& mr, std::uint32_t count, std::uint64_t payload_room, std::vector<TcSpec>& specs) {
  if (count > mr.left / 2) return "metadata claims " + std::to_string(count) + " tensors";  // >= 2 bytes each
  specs.reserve(count);
  std::uint64_t payload = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    TcSpec s{};
    if (std::string why = tc_read_spec(mr, i, payload_room, payload, s); !why.empty()) return why;
    payload += s.bytes;
    specs.push_back(std::move(s));
  }
  if (mr.left != 0) return std::to_string(mr.left) + " stray bytes in the metadata";
  if (payload != payload_room)
    return "tensor sizes add up to " + std::to_string(payload) + " bytes, the entry holds " + std::to_string(payload_room);
  return {};
}

// The tensors' values, read into fresh tensors (a bool's bytes must be 0 or 1). "" or why not.
std::string tc_read_tensors(TcInflater& in, const std::vector<TcSpec>& specs, std::vector<at::Tensor>& tensors) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TcSpec& s = specs[i];
    at::Tensor t = at::empty(s.sizes, at::TensorOptions().dtype(s.dtype->type));
    if (s.bytes != 0) {
      if (!in.read(t.data_ptr(), s.bytes)) return in.error;
      if (s.dtype->type == c10::ScalarType::Bool) {
        const auto* b = static_cast<const unsigned char*>(t.data_ptr());
        if (std::any_of(b, b + s.bytes, [](unsigned char c) { return c > 1; }))
          return "tensor " + std::to_string(i) + " (bool) holds a byte other than 0 and 1";
      }
    }
    tensors.push_back(std::move(t));
  }
  return {};
}

// Decodes an entry file's bytes, checking everything (see the header) before trusting it.
TcDecoded tc_decode(const unsigned char* src, std::size_t size, const std::string& key, const std::string& version) {
  TcDecoded out;
  auto bad = [&out](std::string why) {
    out.tensors.clear();
    out.problem = std::move(why);
    return std::move(out);
  };
  LZ4F_dctx* raw_ctx = nullptr;
  const std::size_t made = LZ4F_createDecompressionContext(&raw_ctx, LZ4F_VERSION);
  if (LZ4F_isError(made)) return bad(tc_lz4_error(made));
  std::unique_ptr<LZ4F_dctx, TcDctxFree> ctx(raw_ctx);
  std::size_t consumed = 0;
  std::uint64_t content = 0;
  if (std::string why = tc_frame_problem(ctx.get(), src, size, consumed, content); !why.empty()) return bad(why);

  TcInflater in{ctx.get(), src, size, consumed, {}};
  std::vector<unsigned char> meta;
  if (std::string why = tc_read_meta(in, content, meta); !why.empty()) return bad(why);
  TcReader mr{meta.data(), meta.size()};
  std::string stored_key, stored_version;
  std::uint32_t count = 0;
  if (!mr.text(stored_key) || !mr.text(stored_version) || !mr.u32(count)) return bad("truncated metadata");
  if (stored_key != key || stored_version != version) {
    out.other_key = true;
    return out;
  }
  std::vector<TcSpec> specs;
  const std::uint64_t payload_room = content - kTcPrefixBytes - meta.size();
  if (std::string why = tc_read_specs(mr, count, payload_room, specs); !why.empty()) return bad(why);
  if (std::string why = tc_read_tensors(in, specs, out.tensors); !why.empty()) return bad(why);
  if (!in.finish()) return bad(in.error);
  return out;
}

// write(2) all of it; 0 or the errno.
int tc_write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}

int tc_fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc != 0 && err != EINVAL ? err : 0;  // EINVAL: the file system cannot sync a directory
}

std::atomic<std::uint64_t> tc_temp_counter{0};

// A tensor to store, with its dtype's entry in this format.
using TcTensor = std::pair<const TcDtype*, at::Tensor>;

// The sample's tensors with their dtypes; throws std::invalid_argument naming the first tensor
// the cache cannot store, and for a key, version or sample too large for the format.
std::vector<TcTensor> tc_storable(const std::string& key, const std::vector<at::Tensor>& sample,
                                  const std::string& version) {
  std::vector<TcTensor> tensors;
  tensors.reserve(sample.size());
  for (std::size_t i = 0; i < sample.size(); ++i) {
    const at::Tensor& t = sample[i];
    const std::string which = "TensorCache::put('" + key + "'): tensor " + std::to_string(i);
    if (!t.defined()) throw std::invalid_argument(which + " is undefined");
    if (t.device().type() != c10::DeviceType::CPU)
      throw std::invalid_argument(which + " is on " + t.device().str() + "; only CPU tensors are cached");
    if (t.layout() != c10::kStrided) {
      std::ostringstream layout;
      layout << t.layout();
      throw std::invalid_argument(which + " has the layout " + layout.str() + "; only strided tensors are cached");
    }
    const TcDtype* dtype = tc_dtype_of(t.scalar_type());
    if (!dtype)
      throw std::invalid_argument(which + " has the dtype " + std::string(c10::toString(t.scalar_type())) +
                                  ", which the cache does not store");
    if (t.dim() > kTcMaxDims)
      throw std::invalid_argument(which + " has " + std::to_string(t.dim()) + " dimensions (at most " +
                                  std::to_string(kTcMaxDims) + ")");
    tensors.emplace_back(dtype, t);
  }
  if (sample.size() > UINT32_MAX || key.size() > kTcMaxMeta / 4 || version.size() > kTcMaxMeta / 4)
    throw std::invalid_argument("TensorCache::put: the key, version or sample is too large to store");
  return tensors;
}

// An entry's header (prefix and metadata) and its uncompressed size, header included.
struct TcHead {
  std::string bytes;
  std::uint64_t raw = 0;
};

// The header, and each tensor made contiguous memory holding its own values (in place).
TcHead tc_head(const std::string& key, const std::string& version, std::vector<TcTensor>& tensors) {
  std::string meta;
  tc_put_u32(meta, static_cast<std::uint32_t>(key.size()));
  meta += key;
  tc_put_u32(meta, static_cast<std::uint32_t>(version.size()));
  meta += version;
  tc_put_u32(meta, static_cast<std::uint32_t>(tensors.size()));
  TcHead head;
  for (auto& [dtype, t] : tensors) {
    t = t.detach().resolve_conj().resolve_neg().contiguous();
    if (dtype->type == c10::ScalarType::Bool) {
      // Bytes other than 0 and 1 (a bool tensor of uninitialised memory) would make the entry
      // unreadable (get checks them): store what LibTorch reads them as.
      const auto* b = static_cast<const unsigned char*>(t.data_ptr());
      if (std::any_of(b, b + t.numel(), [](unsigned char c) { return c > 1; }))
        t = t.view(c10::ScalarType::Byte).ne(0);
    }
    meta.push_back(static_cast<char>(dtype->code));
    meta.push_back(static_cast<char>(t.dim()));
    for (const std::int64_t s : t.sizes()) tc_put_u64(meta, static_cast<std::uint64_t>(s));
    head.raw += static_cast<std::uint64_t>(t.numel()) * dtype->size;
  }
  if (meta.size() > kTcMaxMeta) throw std::invalid_argument("TensorCache::put: the sample's metadata is too large");
  head.bytes.assign(kTcMagic, sizeof kTcMagic);
  tc_put_u32(head.bytes, kTcFormat);
  tc_put_u32(head.bytes, static_cast<std::uint32_t>(meta.size()));
  head.bytes += meta;
  head.raw += head.bytes.size();
  return head;
}

// The LZ4 frame of an entry of `raw` uncompressed bytes.
LZ4F_preferences_t tc_frame_preferences(std::uint64_t raw, int compression_level) {
  LZ4F_preferences_t prefs{};
  // Independent 256 KB blocks: a block decodes straight into the tensor it belongs to when the
  // tensor has that much room left (bigger blocks would go through LZ4's own buffer more often).
  prefs.frameInfo.blockSizeID = LZ4F_max256KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  prefs.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
  prefs.frameInfo.contentSize = raw;
  prefs.compressionLevel = compression_level;
  prefs.favorDecSpeed = 1;
  return prefs;
}

// A new file holding one LZ4 frame, compressed through a buffer of its own. The first thing
// that goes wrong is kept in `failure`, with the path and the system's reason; every step after
// it does nothing and returns false.
class TcFrameFile {
 public:
  TcFrameFile(std::string path, const LZ4F_preferences_t& prefs) : path_(std::move(path)), prefs_(prefs) {
    LZ4F_cctx* raw_ctx = nullptr;
    made_ = LZ4F_createCompressionContext(&raw_ctx, LZ4F_VERSION);
    ctx_.reset(LZ4F_isError(made_) ? nullptr : raw_ctx);
    capacity_ = kTcFlushAt + LZ4F_compressBound(kTcSlice, &prefs_) + LZ4F_HEADER_SIZE_MAX;
    out_.reset(new char[capacity_]);  // before the file, which a failed allocation must not leave
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) failure = "cannot create " + path_ + ": " + tc_strerror(errno);
  }
  ~TcFrameFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  TcFrameFile(const TcFrameFile&) = delete;
  TcFrameFile& operator=(const TcFrameFile&) = delete;

  bool opened() const { return fd_ >= 0; }
  std::uint64_t written() const { return written_; }

  bool begin() {
    return (ctx_ != nullptr || check(made_, "context")) &&
           check(LZ4F_compressBegin(ctx_.get(), out_.get(), capacity_, &prefs_), "begin");
  }

  // Compresses `n` bytes, then flushes: the next piece starts a block of its own.
  bool feed(const char* p, std::size_t n) {
    while (n > 0) {
      const std::size_t part = std::min(n, kTcSlice);
      if (!room_for(part) ||
          !check(LZ4F_compressUpdate(ctx_.get(), out_.get() + filled_, capacity_ - filled_, p, part, nullptr), "update"))
        return false;
      p += part;
      n -= part;
    }
    return room_for(0) && check(LZ4F_flush(ctx_.get(), out_.get() + filled_, capacity_ - filled_, nullptr), "flush");
  }

  // The frame's end, written out.
  bool end() {
    return room_for(0) && check(LZ4F_compressEnd(ctx_.get(), out_.get() + filled_, capacity_ - filled_, nullptr), "end") &&
           flush_out();
  }

  // A complete frame (`ok`) is stamped with the time (put counts as a use) and synced; the
  // file is closed either way.
  void close(bool ok) {
    if (ok) {
      tc_touch(fd_);
      if (::fsync(fd_) != 0) failure = "cannot sync " + path_ + ": " + tc_strerror(errno);
    }
    const int closed = ::close(fd_);
    fd_ = -1;
    if (closed != 0 && failure.empty()) failure = "cannot close " + path_ + ": " + tc_strerror(errno);
  }

  std::string failure;

 private:
  bool flush_out() {
    if (const int err = tc_write_all(fd_, out_.get(), filled_)) {
      failure = "cannot write " + path_ + ": " + tc_strerror(err);
      return false;
    }
    written_ += filled_;
    filled_ = 0;
    return true;
  }
  // Makes room for the output of `in` more input bytes (0: a flush or the frame's end).
  bool room_for(std::size_t in) { return filled_ + LZ4F_compressBound(in, &prefs_) <= capacity_ || flush_out(); }
  bool check(std::size_t rc, const char* step) {
    if (!LZ4F_isError(rc)) {
      filled_ += rc;
      return true;
    }
    failure = std::string("LZ4 ") + step + " failed for " + path_ + ": " + LZ4F_getErrorName(rc);
    return false;
  }

  std::string path_;
  LZ4F_preferences_t prefs_;
  std::size_t made_ = 0;  // what creating the context returned
  std::unique_ptr<LZ4F_cctx, TcCctxFree> ctx_;
  std::size_t capacity_ = 0;
  std::unique_ptr<char[]> out_;
  std::size_t filled_ = 0;
  std::uint64_t written_ = 0;
  int fd_ = -1;
};

// What writing an entry's file did: its size, or what went wrong.
struct TcWritten {
  std::uint64_t bytes = 0;
  std::string failure;
};

// Writes the entry (its header, then each tensor's values) to the new file `path`.
TcWritten tc_write_entry(const std::string& path, const TcHead& head, const std::vector<TcTensor>& tensors,
                         int compression_level) {
  TcFrameFile file(path, tc_frame_preferences(head.raw, compression_level));
  if (!file.opened()) return {0, file.failure};
  bool ok = file.begin() && file.feed(head.bytes.data(), head.bytes.size());
  for (std::size_t i = 0; ok && i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i].second;
    const std::size_t n = static_cast<std::size_t>(t.numel()) * tensors[i].first->size;
    if (n != 0) ok = file.feed(static_cast<const char*>(t.data_ptr()), n);
  }
  ok = ok && file.end();
  file.close(ok);
  return {file.written(), file.failure};
}

// Why the file `st` describes is no entry to read, before reading it: not a regular file, empty,
// or larger than `limit`. "" when it may be one.
std::string tc_unreadable(const struct stat& st, std::uint64_t limit) {
  if (S_ISFIFO(st.st_mode)) return "not a regular file (a FIFO)";
  if (S_ISSOCK(st.st_mode)) return "not a regular file (a socket)";
  if (S_ISDIR(st.st_mode)) return "not a regular file (a directory)";
  if (!S_ISREG(st.st_mode)) return "not a regular file (a device)";
  if (st.st_size == 0) return "empty file";
  if (static_cast<std::uint64_t>(st.st_size) > limit)
    return "larger (" + std::to_string(st.st_size) + " bytes) than the cache keeps (" + std::to_string(limit) +
           " bytes)";
  return {};
}

// Reads the `size` bytes of the regular file `fd` into `out`; why it could not ("" when it did).
std::string tc_read_all(int fd, unsigned char* out, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, out + got, size - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "cannot read it: " + tc_strerror(errno);
    if (n == 0) return "it shrank to " + std::to_string(got) + " bytes while being read";
    got += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace

TensorCache::TensorCache(TensorCacheOptions options) : options_(std::move(options)) {
  dir_ = options_.dir;
  if (dir_.empty()) {
    std::string off;
    const std::string root = decision_cache_dir(&off);
    if (root.empty()) {  // caching is off: decision_cache_dir said why, once for the process
      disabled_reason_ = off;
      return;
    }
    dir_ = root + "/tensors";
  }
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  std::string problem;
  if (ec) {
    problem = "cannot create the directory " + dir_ + ": " + ec.message();
  } else if (!std::filesystem::is_directory(dir_, ec)) {
    problem = dir_ + " is not a directory";
  } else if (::access(dir_.c_str(), W_OK | X_OK) != 0) {
    problem = "the directory " + dir_ + " is not writable: " + tc_strerror(errno);
  } else {
    TcDirLock lock(dir_);
    if (!lock.held()) {
      problem = lock.error();
    } else {
      enabled_.store(true, std::memory_order_release);
      lock.set_total(scan_and_evict({}));
    }
  }
  if (!problem.empty()) {
    disabled_reason_ = problem;
    report("tensor cache: disabled: " + problem);
  }
}

const std::string& TensorCache::disabled_reason() const noexcept {
  static const std::string none;
  return enabled() ? none : disabled_reason_;
}

std::string TensorCache::entry_path(const std::string& key) const {
  return dir_ + "/" + tc_entry_name(options_.version, key);
}

void TensorCache::report(const std::string& line) const {
  if (options_.warn)
    options_.warn(line);
  else
    spdlog::warn("{}", line);
}

void TensorCache::disable(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(disable_mutex_);
    if (!enabled_.load(std::memory_order_acquire)) return;  // one warning per object
    disabled_reason_ = reason;
    enabled_.store(false, std::memory_order_release);
  }
  report("tensor cache: disabled: " + reason);
}

TensorCache::Stats TensorCache::stats() const {
  Stats s;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.puts = puts_.load();
  s.corrupt = corrupt_.load();
  s.evictions = evictions_.load();
  s.bytes_on_disk = bytes_on_disk_.load();
  s.bytes_raw_written = bytes_raw_written_.load();
  s.bytes_compressed_written = bytes_compressed_written_.load();
  return s;
}

std::uint64_t TensorCache::scan_and_evict(const std::string& keep) {
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return bytes_on_disk_.load();  // the next write reports what is wrong with the directory
  struct Entry {
    std::string name;
    timespec mtime;
    std::uint64_t size;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  const std::time_t now = tc_now().tv_sec;
  const int dfd = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    const bool entry = tc_is_entry_name(e->d_name);
    if (!entry && !tc_is_temp_name(e->d_name)) continue;
    struct stat st {};
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (entry) {
      entries.push_back({e->d_name, st.st_mtim, static_cast<std::uint64_t>(st.st_size)});
      total += static_cast<std::uint64_t>(st.st_size);
    } else if (now - st.st_mtim.tv_sec > kTcStaleTempSeconds) {
      (void)::unlinkat(dfd, e->d_name, 0);  // a writer that died mid-write; another process may have removed it
    }
  }
  if (total > options_.budget_bytes) {
    // Down to 90% of the budget: a full cache then lists its directory once per tenth of the
    // budget written, not at every put.
    const std::uint64_t target = options_.budget_bytes - options_.budget_bytes / 10;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
      if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
      return a.name < b.name;
    });
    for (const Entry& e : entries) {
      if (total <= target) break;
      if (e.name == keep) continue;
      if (::unlinkat(dfd, e.name.c_str(), 0) == 0) {
        evictions_.fetch_add(1);
        total -= e.size;
      } else if (errno == ENOENT) {
        total -= e.size;
      }
    }
  }
  ::closedir(d);
  bytes_on_disk_.store(total);
  return total;
}

void TensorCache::drop_bad_entry(const std::string& path, int fd, const std::string& key, const std::string& why) {
  corrupt_.fetch_add(1);
  std::string removed = "removed";
  // Under the lock, and only if the name still holds the file read: a writer may have renamed
  // a good entry over it since.
  TcDirLock lock(dir_);
  struct stat mine {}, now {};
  if (::fstat(fd, &mine) == 0 && ::stat(path.c_str(), &now) == 0 && mine.st_dev == now.st_dev &&
      mine.st_ino == now.st_ino) {
    if ((S_ISDIR(mine.st_mode) ? ::rmdir(path.c_str()) : ::unlink(path.c_str())) != 0) {
      removed = "cannot remove it: " + tc_strerror(errno);
    } else if (lock.held()) {
      if (const auto total = lock.total()) {
        const auto size = static_cast<std::uint64_t>(mine.st_size);
        lock.set_total(*total > size ? *total - size : 0);
      }
    }
  } else {
    removed = "already replaced";
  }
  report("tensor cache: bad entry " + path + " (key '" + key + "'): " + why + "; " + removed);
}

std::optional<std::vector<at::Tensor>> TensorCache::get(const std::string& key) {
  if (!enabled()) {
    misses_.fetch_add(1);
    return std::nullopt;
  }
  const std::string path = entry_path(key);
  // Non-blocking: a FIFO under an entry's name is refused below, not waited on for a writer.
  TcFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  struct stat st {};
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0) {
    misses_.fetch_add(1);
    return std::nullopt;
  }
  const std::uint64_t limit = std::max(options_.budget_bytes, kTcReadFloor);
  std::string problem = tc_unreadable(st, limit);
  const auto size = static_cast<std::size_t>(st.st_size);
  std::unique_ptr<unsigned char[]> bytes;
  if (problem.empty()) {
    bytes.reset(new unsigned char[size == 0 ? 1 : size]);
    problem = tc_read_all(f.fd, bytes.get(), size);
  }
  TcDecoded decoded;
  if (problem.empty()) decoded = tc_decode(bytes.get(), size, key, options_.version);
  if (problem.empty()) problem = decoded.problem;
  if (!problem.empty()) {
    drop_bad_entry(path, f.fd, key, problem);
    misses_.fetch_add(1);
    return std::nullopt;
  }
  if (decoded.other_key) {
    misses_.fetch_add(1);
    return std::nullopt;
  }
  tc_touch(f.fd);
  hits_.fetch_add(1);
  return std::move(decoded.tensors);
}

std::optional<at::Tensor> TensorCache::get_tensor(const std::string& key) {
  auto sample = get(key);
  if (!sample || sample->size() != 1) return std::nullopt;
  return std::move(sample->front());
}

void TensorCache::put(const std::string& key, const at::Tensor& tensor) { put(key, std::vector<at::Tensor>{tensor}); }

void TensorCache::put(const std::string& key, const std::vector<at::Tensor>& sample) {
  std::vector<TcTensor> tensors = tc_storable(key, sample, options_.version);
  if (!enabled()) return;
  const TcHead head = tc_head(key, options_.version, tensors);
  const std::string name = tc_entry_name(options_.version, key);
  const std::string path = dir_ + "/" + name;
  const std::string temp = dir_ + "/." + name + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(tc_temp_counter.fetch_add(1));
  const TcWritten written = tc_write_entry(temp, head, tensors, options_.compression_level);
  std::string failure = written.failure;  // the first thing that went wrong, with the path and the system's reason
  if (failure.empty()) {
    // The entry takes its name under the lock, and the directory's total is kept there.
    TcDirLock lock(dir_);
    struct stat old {};
    const std::uint64_t replaced =
        ::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) ? static_cast<std::uint64_t>(old.st_size) : 0;
    if (!lock.held()) {
      failure = lock.error();
    } else if (::rename(temp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      // ENOENT: another process took the temporary file for a dead writer's (a put stalled
      // for minutes); this entry is just not stored.
      if (err == ENOENT) return;
      failure = "cannot rename " + temp + " to " + path + ": " + tc_strerror(err);
    } else {
      if (const int err = tc_fsync_dir(dir_)) spdlog::debug("tensor cache: fsync of {}: {}", dir_, tc_strerror(err));
      puts_.fetch_add(1);
      bytes_raw_written_.fetch_add(head.raw);
      bytes_compressed_written_.fetch_add(written.bytes);
      const std::optional<std::uint64_t> before = lock.total();
      const std::uint64_t total = before ? (*before > replaced ? *before - replaced : 0) + written.bytes : 0;
      if (!before || total > options_.budget_bytes) {
        lock.set_total(scan_and_evict(name));
      } else {
        lock.set_total(total);
        bytes_on_disk_.store(total);
      }
      return;
    }
  }
  ::unlink(temp.c_str());
  disable(failure);
}

std::vector<at::Tensor> TensorCache::get_or_compute(const std::string& key,
                                                    const std::function<std::vector<at::Tensor>()>& compute) {
  if (auto hit = get(key)) return std::move(*hit);
  std::vector<at::Tensor> sample = compute();
  put(key, sample);
  return sample;
}

at::Tensor TensorCache::get_or_compute_tensor(const std::string& key, const std::function<at::Tensor()>& compute) {
  if (auto hit = get_tensor(key)) return std::move(*hit);
  at::Tensor t = compute();
  put(key, t);
  return t;
}

}  // namespace accelkit
