#include "process_memory.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <accelkit/sdk/host_paths.hpp>

#include "meminfo.hpp"

namespace accelkit::cpu {

ProcStatusMemory parse_proc_status_memory(std::string_view text) {
  std::string implausible;
  const std::map<std::string, std::uint64_t> kb = parse_kb_lines(text, implausible);
  auto field = [&](const char* key) -> std::optional<std::uint64_t> {
    auto it = kb.find(key);
    return it == kb.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
  };
  return {field("VmRSS"), field("VmHWM")};
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
