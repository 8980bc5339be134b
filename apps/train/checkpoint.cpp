// Checkpoint files: envelope, atomic write, listing, pruning, directory lock.
#include "accelkit/checkpoint.hpp"

#include "accelkit/atomic_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include <torch/version.h>

namespace accelkit {

namespace fs = std::filesystem;

namespace {

// Header: magic[8], u32 format version, u32 crc32(payload), u64 payload size; little-endian.
// Version 2 appends char[16]: the LibTorch version that wrote the payload ("2.13.0", NUL
// padded): a LibTorch reads archives of its own and older releases, not newer ones.
constexpr char kMagic[8] = {'A', 'K', 'C', 'K', 'P', 'T', '\r', '\n'};
constexpr std::uint32_t kFormatVersion = 2;
constexpr std::size_t kHeaderSizeV1 = 24;
constexpr std::size_t kTorchField = 16;
constexpr std::size_t kHeaderSize = kHeaderSizeV1 + kTorchField;
constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".ckpt";

std::string errno_text(int err) { return std::strerror(err); }

// The LibTorch release this build runs, as its headers say.
#define CKPT_STR2_(x) #x
#define CKPT_STR_(x) CKPT_STR2_(x)
#define TORCH_VERSION_STRING_ \
  CKPT_STR_(TORCH_VERSION_MAJOR) "." CKPT_STR_(TORCH_VERSION_MINOR) "." CKPT_STR_(TORCH_VERSION_PATCH)

// Whether release `a` ("2.13.0") has a higher major.minor than `b`; an unreadable `a` counts
// as newer (nothing can be promised about it).
bool newer_release(const std::string& a, const std::string& b) {
  unsigned am = 0, an = 0, bm = 0, bn = 0;
  if (std::sscanf(a.c_str(), "%u.%u", &am, &an) != 2) return true;
  if (std::sscanf(b.c_str(), "%u.%u", &bm, &bn) != 2) return false;
  return am != bm ? am > bm : an > bn;
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// step-<digits>.ckpt -> step, or -1.
std::int64_t step_of(const std::string& name) {
  const std::size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
      name.compare(name.size() - suffix, suffix, kSuffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix, name.size() - prefix - suffix);
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

// .step-<digits>.ckpt.tmp-<pid>
bool is_temp_name(const std::string& name) {
  const std::size_t tmp = name.find(".tmp-");
  return !name.empty() && name[0] == '.' && tmp != std::string::npos && tmp > 1 && step_of(name.substr(1, tmp - 1)) >= 0;
}

}  // namespace

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {}

CheckpointDir::CheckpointDir(CheckpointDir&& other) noexcept : dir_(std::move(other.dir_)), lock_fd_(other.lock_fd_) {
  other.lock_fd_ = -1;
}

CheckpointDir::~CheckpointDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

std::string CheckpointDir::path_for(std::int64_t step) const {
  char name[48];
  std::snprintf(name, sizeof name, "%s%08lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return (fs::path(dir_) / name).string();
}

void CheckpointDir::lock() {
  if (lock_fd_ >= 0) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw CheckpointError("cannot create checkpoint directory " + dir_ + ": " + ec.message());
  int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError("cannot open checkpoint directory " + dir_ + ": " + errno_text(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      throw CheckpointError("checkpoint directory " + dir_ + " is in use by another training run");
    throw CheckpointError("cannot lock checkpoint directory " + dir_ + ": " + errno_text(err));
  }
  lock_fd_ = fd;
}

std::vector<CheckpointFile> CheckpointDir::list() const {
  std::vector<CheckpointFile> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::int64_t step = step_of(it->path().filename().string());
    if (step >= 0 && it->is_regular_file(ec)) out.push_back({step, it->path().string()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointFile& a, const CheckpointFile& b) { return a.step > b.step; });
  return out;
}

std::string CheckpointDir::write(std::int64_t step, std::string_view payload) const {
  std::string bytes;
  bytes.reserve(kHeaderSize + payload.size());
  bytes.append(kMagic, sizeof kMagic);
  put_le(bytes, kFormatVersion, 4);
  put_le(bytes, crc32(payload), 4);
  put_le(bytes, payload.size(), 8);
  std::string torch(TORCH_VERSION_STRING_);
  torch.resize(kTorchField, '\0');
  bytes.append(torch);
  bytes.append(payload);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw CheckpointError("cannot create checkpoint directory " + dir_ + ": " + ec.message());
  const std::string path = path_for(step);
  try {
    write_file_atomically(path, bytes);
  } catch (const std::runtime_error& e) {
    throw CheckpointError(e.what());
  }
  return path;
}

std::string CheckpointDir::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("cannot open: " + errno_text(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw CheckpointError("read error");
  if (bytes.size() < kHeaderSizeV1) {
    if (bytes.compare(0, bytes.size(), kMagic, std::min(bytes.size(), sizeof kMagic)) == 0)
      throw CheckpointError("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
    throw CheckpointError("not an accelkit checkpoint (no header)");
  }
  if (bytes.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
    throw CheckpointError("not an accelkit checkpoint (bad magic)");
  const auto version = static_cast<std::uint32_t>(get_le(bytes.data() + 8, 4));
  if (version != 1 && version != kFormatVersion)
    throw CheckpointError("checkpoint format version " + std::to_string(version) + ", this build reads versions 1 to " +
                          std::to_string(kFormatVersion));
  const std::size_t header = version == 1 ? kHeaderSizeV1 : kHeaderSize;
  if (bytes.size() < header)
    throw CheckpointError("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  if (version >= 2) {
    const std::string written(bytes.data() + kHeaderSizeV1, ::strnlen(bytes.data() + kHeaderSizeV1, kTorchField));
    if (newer_release(written, TORCH_VERSION_STRING_))
      throw CheckpointError("written by LibTorch " + written + ", newer than this build's " + TORCH_VERSION_STRING_ +
                            ", which cannot read it: resume with an accelkit built against LibTorch " +
                            written.substr(0, written.find('.', written.find('.') + 1)) + " or newer");
  }
  const auto crc = static_cast<std::uint32_t>(get_le(bytes.data() + 12, 4));
  const std::uint64_t size = get_le(bytes.data() + 16, 8);
  const std::uint64_t have = bytes.size() - header;
  if (have < size)
    throw CheckpointError("truncated: " + std::to_string(have) + " of " + std::to_string(size) + " payload bytes");
  if (have > size)
    throw CheckpointError("trailing garbage: " + std::to_string(have - size) + " bytes after the payload");
  std::string payload = bytes.substr(header);
  if (crc32(payload) != crc) throw CheckpointError("checksum mismatch: the file is damaged");
  return payload;
}

std::vector<std::string> CheckpointDir::prune(std::size_t keep) const {
  std::vector<std::string> removed;
  if (keep == 0) return removed;
  auto all = list();
  for (std::size_t i = keep; i < all.size(); ++i) {
    std::error_code ec;
    if (fs::remove(all[i].path, ec)) removed.push_back(all[i].path);
  }
  return removed;
}

std::vector<std::string> CheckpointDir::remove_stale_temp_files() const {
  std::vector<std::string> removed;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (!is_temp_name(it->path().filename().string())) continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm)) removed.push_back(it->path().string());
  }
  return removed;
}

}  // namespace accelkit
