#include "model_archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>

#include "accelkit/crc32.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/base/strings.hpp"

namespace accelkit::model_archive {
namespace {

// ---- the archive's zip directory: each record's name, recorded CRC-32 and size --------------

struct ZipEntry {
  std::string name;  // as stored: "<archive>/<record>"
  std::uint32_t crc = 0;
  std::uint64_t size = 0;  // uncompressed; UINT64_MAX when only zip64's extra field has it
};

std::uint64_t le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

class ArchiveFile {
 public:
  explicit ArchiveFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {
    struct stat st {};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~ArchiveFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ArchiveFile(const ArchiveFile&) = delete;
  ArchiveFile& operator=(const ArchiveFile&) = delete;
  std::uint64_t size() const { return size_; }
  bool read(std::uint64_t at, std::size_t n, std::vector<unsigned char>& out) const {
    if (size_ == 0 || at > size_ || n > size_ - at) return false;
    out.resize(n);
    return ::pread(fd_, out.data(), n, static_cast<off_t>(at)) == static_cast<ssize_t>(n);
  }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// Where the central directory is and how many entries it has (zip64 included); false when the
// end record cannot be found.
bool find_directory(const ArchiveFile& f, std::uint64_t& offset, std::uint64_t& entries) {
  const std::uint64_t tail = std::min<std::uint64_t>(f.size(), 65557);
  std::vector<unsigned char> b;
  if (tail < 22 || !f.read(f.size() - tail, tail, b)) return false;
  for (std::size_t i = tail - 22 + 1; i-- > 0;) {
    if (le(&b[i], 4) != 0x06054b50) continue;
    entries = le(&b[i + 10], 2);
    offset = le(&b[i + 16], 4);
    if (offset != 0xFFFFFFFFu && entries != 0xFFFF) return true;
    const std::uint64_t locator = f.size() - tail + i - 20;  // zip64's locator precedes the end record
    std::vector<unsigned char> loc, end64;
    if (i < 20 || !f.read(locator, 20, loc) || le(loc.data(), 4) != 0x07064b50) return false;
    if (!f.read(le(&loc[8], 8), 56, end64) || le(end64.data(), 4) != 0x06064b50) return false;
    entries = le(&end64[32], 8);
    offset = le(&end64[48], 8);
    return true;
  }
  return false;
}

std::vector<ZipEntry> read_directory(const ArchiveFile& f) {
  std::vector<ZipEntry> out;
  std::uint64_t at = 0, entries = 0;
  if (!find_directory(f, at, entries)) return out;
  std::vector<unsigned char> h, name;
  for (std::uint64_t i = 0; i < entries && i < 1000000; ++i) {
    if (!f.read(at, 46, h) || le(h.data(), 4) != 0x02014b50) return {};
    const std::size_t name_len = le(&h[28], 2), extra_len = le(&h[30], 2), comment_len = le(&h[32], 2);
    if (!f.read(at + 46, name_len, name)) return {};
    ZipEntry e;
    e.name.assign(name.begin(), name.end());
    e.crc = static_cast<std::uint32_t>(le(&h[16], 4));
    e.size = le(&h[24], 4);
    if (e.size == 0xFFFFFFFFu) e.size = UINT64_MAX;
    out.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

// ---- LibTorch's message, shortened ------------------------------------------------------------

bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// Cuts `line` at the first of `markers` found in it.
void cut_at(std::string& line, std::initializer_list<const char*> markers) {
  for (const char* m : markers)
    if (const auto at = line.find(m); at != std::string::npos) line.resize(at);
  while (!line.empty() && (line.back() == ' ' || line.back() == '.' || line.back() == ':')) line.pop_back();
}

// What kind of damage LibTorch's message shows.
std::string kind_of(const std::string& what) {
  if (has(what, "PytorchStreamReader failed") || has(what, "zip archive") || has(what, "central directory"))
    return "a damaged or truncated zip archive";
  if (has(what, "hasRecord(\"version\")") || has(what, "hasRecord(\"model.json\")"))
    return "a zip archive without PyTorch's records";
  if (has(what, "pickle") || has(what, "Unpickler") || has(what, "opcode")) return "a damaged record: a pickle in it does not parse";
  if (has(what, "token") || has(what, "Expected") || has(what, "expected") || has(what, "Unknown type name") ||
      has(what, "undefined value"))
    return "a damaged or foreign code record: its TorchScript code does not compile here";
  return "";
}

}  // namespace

std::string message_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  std::string what = e.what();
  for (const char* marker : {"\nException raised from", "\nframe #"})
    if (const auto at = what.find(marker); at != std::string::npos) what.resize(at);
  return what;
}

std::string libtorch_quote(const std::string& what, std::size_t max) {
  std::string line = text::torch_error_line(what, 100000);
  cut_at(line, {" This is an internal miniz error", "  (Could this error message be improved?",
                " (Could this error message be improved?", " (Triggered internally"});
  // A parse error's offending byte may be a control character: shown as \xNN.
  std::string clean;
  for (const unsigned char ch : line) {
    if (ch >= 0x20 && ch < 0x7f) {
      clean += static_cast<char>(ch);
    } else {
      static const char* hex = "0123456789abcdef";
      clean += std::string("\\x") + hex[ch >> 4] + hex[ch & 15];
    }
  }
  // The lexer's "found '<byte>' here" loses its end at a NUL byte: the quote is closed.
  if (std::count(clean.begin(), clean.end(), '\'') % 2 == 1) clean += "...'";
  return text::shorten(clean, max);
}

std::string damaged_text(const std::string& record) {
  return "a damaged record: " + text::shorten(record, 100) + " does not match its checksum, so it changed after saving";
}

std::string damaged_record(const std::string& path, const std::function<bool(const std::string&)>& which) {
  const ArchiveFile file(path);
  std::vector<ZipEntry> entries = read_directory(file);
  if (entries.empty()) return {};
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const std::exception&) {
    return {};
  }
  // Code and pickles first: the records whose damage stops a load.
  std::stable_sort(entries.begin(), entries.end(), [](const ZipEntry& a, const ZipEntry& b) { return a.size < b.size; });
  for (const auto& e : entries) {
    if (e.size > (512ull << 20)) break;
    const auto slash = e.name.find('/');
    if (slash == std::string::npos || e.name.back() == '/') continue;
    const std::string record = e.name.substr(slash + 1);
    // A writer may leave the CRC out (torch.serialization.config.save.compute_crc32 = False
    // records 0): nothing to check against.
    if ((which && !which(record)) || (e.crc == 0 && e.size != 0)) continue;
    try {
      if (!reader->hasRecord(record)) continue;
      auto [data, n] = reader->getRecord(record);
      if (n != e.size || crc32(std::string_view(reinterpret_cast<const char*>(data.get()), n)) != e.crc) return record;
    } catch (const std::exception&) {
      return record;
    }
  }
  return {};
}

std::string load_failure(const std::string& path, const std::string& what_it_is_not, const std::string& what) {
  std::string kind;
  if (const std::string record = damaged_record(path); !record.empty())
    kind = damaged_text(record);
  else
    kind = kind_of(what);
  const std::string file = text::shorten(path, 120);
  std::string head = file + ": " + what_it_is_not + " (" + (kind.empty() ? "" : kind + "; ") + "LibTorch " +
                     host_torch_version() + ": ";
  // 300 characters in all: shorten() adds "... (N bytes)" to what it cuts.
  const std::size_t room = head.size() < 200 ? 300 - 24 - head.size() - 1 : 60;
  return head + libtorch_quote(what, room) + ")";
}

}  // namespace accelkit::model_archive
