// Checkpoint files: a directory of `step-<N>.ckpt` files, each written atomically (temp file
// in the same directory, fsync, rename, fsync the directory) and wrapped in a small envelope
// (magic, format version, payload size, CRC-32, and the LibTorch version that wrote it) so
// that a truncated or damaged file is told apart from a good one before anything is parsed,
// and one written by a newer LibTorch than this build's is refused naming both versions (a
// LibTorch reads archives of its own and older releases). The payload is opaque here (the
// trainer stores a torch::serialize archive).
//
// Thread-safety: none; one writer per directory (CheckpointDir::lock() enforces it across
// processes).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "accelkit/crc32.hpp"  // crc32, which checkpoints carry over their payload

namespace accelkit {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CheckpointFile {
  std::int64_t step = 0;
  std::string path;
};

class CheckpointDir {
 public:
  explicit CheckpointDir(std::string dir);
  CheckpointDir(CheckpointDir&& other) noexcept;
  CheckpointDir& operator=(CheckpointDir&&) = delete;
  CheckpointDir(const CheckpointDir&) = delete;
  CheckpointDir& operator=(const CheckpointDir&) = delete;
  ~CheckpointDir();

  const std::string& path() const noexcept { return dir_; }
  std::string path_for(std::int64_t step) const;  // <dir>/step-00000100.ckpt

  // Creates the directory if needed and takes an exclusive advisory lock on it (flock) until
  // destruction; throws CheckpointError when another process holds it.
  void lock();

  // Checkpoints present, newest (highest step) first. A missing directory has none.
  std::vector<CheckpointFile> list() const;

  // Envelope + atomic write of `payload` as step `step`; returns the final path.
  std::string write(std::int64_t step, std::string_view payload) const;

  // The payload of a checkpoint file, verified; throws CheckpointError saying what is wrong
  // (unreadable, truncated, not a checkpoint, unknown format version, written by a newer
  // LibTorch, checksum mismatch). Format 1 files (no LibTorch version) are still read.
  static std::string read(const std::string& path);

  // Deletes all but the newest `keep` checkpoints (keep == 0 keeps all); returns the deleted.
  std::vector<std::string> prune(std::size_t keep) const;

  // Deletes temp files that an interrupted write left behind; returns them.
  std::vector<std::string> remove_stale_temp_files() const;

 private:
  std::string dir_;
  int lock_fd_ = -1;
};

}  // namespace accelkit
