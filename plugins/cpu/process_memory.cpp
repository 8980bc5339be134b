#include "process_memory.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <accelkit/sdk/host_paths.hpp>

#include "meminfo.hpp"

namespace accelkit::cpu {
namespace {

// "VmRSS:\t  123456 kB" -> bytes.
std::optional<std::uint64_t> kb_field(std::string_view text, std::string_view key) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') continue;
    std::size_t i = key.size() + 1;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::uint64_t kb = 0;
    std::size_t digits = 0;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && digits < 15; ++i, ++digits)
      kb = kb * 10 + static_cast<std::uint64_t>(line[i] - '0');
    if (digits == 0 || digits == 15 || line.substr(i).find("kB") == std::string_view::npos) return std::nullopt;
    return kb * 1024;
  }
  return std::nullopt;
}

}  // namespace

ProcStatusMemory parse_proc_status_memory(std::string_view text) {
  return {kb_field(text, "VmRSS"), kb_field(text, "VmHWM")};
}

MemoryStats read_process_memory(const host::FileReader& reader) {
  const host::FileReader read = reader ? reader : host::FileReader(host::read_file);
  MemoryStats s;
  const std::string status_path = procfs_path("self/status");
  const std::string meminfo_path = procfs_path("meminfo");
  s.source = status_path + " (VmRSS, VmHWM); " + meminfo_path + " (MemTotal, MemAvailable)";
  s.note = "the process's resident set: tensors, LibTorch's caches and everything else the process holds";
  const host::ReadResult status = read(status_path);
  if (status.ok()) {
    const ProcStatusMemory m = parse_proc_status_memory(status.text);
    s.in_use = m.rss_bytes;
    s.peak = m.peak_bytes;
    if (!m.rss_bytes) s.note += "; no VmRSS in " + status_path;
  } else {
    s.note += "; cannot read " + status_path + ": " + host::failure(status);
  }
  const host::ReadResult mem = read(meminfo_path);
  if (mem.ok()) {
    const MemInfo m = parse_meminfo(mem.text);
    if (m.total_bytes > 0) s.total = m.total_bytes;
    s.available = m.available_bytes;
  } else {
    s.note += "; cannot read " + meminfo_path + ": " + host::failure(mem);
  }
  return s;
}

Status reset_process_peak() {
  const std::string path = procfs_path("self/clear_refs");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return Status(StatusCode::not_supported, "cannot reset the peak resident set: " + path + ": " + std::strerror(errno));
  const ssize_t n = ::write(fd, "5", 1);
  const int err = errno;
  ::close(fd);
  if (n != 1)
    return Status(StatusCode::not_supported,
                  "cannot reset the peak resident set: writing 5 to " + path + ": " + std::strerror(err));
  return Status();
}

}  // namespace accelkit::cpu
