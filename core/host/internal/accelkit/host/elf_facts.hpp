// What the loader learns from a plugin file before dlopen(): the handshake note
// (ACCELKIT_PLUGIN_NOTE, section ".accelkit_plugin") and the libraries it needs (DT_NEEDED).
// Reads with pread, bounded: every offset and size is checked against the file's size and a
// cap, so a damaged or hostile file gives an error string, never a crash or a huge allocation.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace accelkit {

struct ElfFacts {
  bool elf64_le = false;                 // only 64-bit little-endian files are read further
  std::optional<std::string> note;       // the section's text, when present
  std::vector<std::string> needed;       // DT_NEEDED, in order
  std::vector<std::string> undefined;    // with want_undefined: strong undefined dynamic symbols
};

// Facts of the ELF shared object at `path`; on failure returns nullopt with *error set.
std::optional<ElfFacts> read_elf_facts(const std::string& path, std::string* error, bool want_undefined = false);

// "libc10.so.1.13" -> "libc10.so"; "" for names that are not LibTorch's own libraries.
std::string torch_library_stem(const std::string& file);

// "" when every LibTorch library the file needs is the one loaded in this process (by stem);
// else "built against another LibTorch: it needs <lib>, this process's LibTorch <version> is
// <loaded lib>". Libraries this process has not loaded are not judged.
std::string foreign_torch_library(const ElfFacts& facts, const std::string& host_version);

// The note's "key value" lines as pairs; lines without a space are skipped.
std::vector<std::pair<std::string, std::string>> parse_plugin_note(const std::string& text);

}  // namespace accelkit
