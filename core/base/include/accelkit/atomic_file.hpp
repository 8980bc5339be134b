// Writing a file so that readers see the old content or the new, never a torn one: the
// decision caches, checkpoints and any other state accelkit keeps on disk.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace accelkit {

// Writes `bytes` to `path` atomically: a temporary `.<name>.tmp-<pid>` in the same directory
// (mode 0644), fsync, rename over `path`, fsync the directory. The directory must exist. The
// temporary file is removed on failure. Throws std::runtime_error naming the step that failed,
// the file asked for and the system's reason (with EFBIG, the process's file-size limit).
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace accelkit
