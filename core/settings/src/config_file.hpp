// The settings' config file, read and parsed once per process: Settings (top-level keys and
// [routing]'s presence), the routing table and the [train] table all take the same parsed
// document, so a file is parsed once however many of them look at it (and however often a
// program resolves its settings). A file whose bytes changed is parsed again.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

namespace accelkit::config_detail {

struct ParsedConfig {
  std::shared_ptr<const toml::table> root;  // null when the file could not be read or parsed
  std::string read_error;   // why it could not be read ("is a directory", "No such file ...")
  std::string parse_error;  // "path:line:column: invalid TOML: ..." when it is not TOML
};

// The file at `path`, parsed (or the parse of identical bytes this process already made).
ParsedConfig parse_config(const std::string& path);

// Parses this process has made (a test counts them).
std::size_t parse_count() noexcept;

// A table's entries in the order they appear in the file, so that problems read top to bottom.
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& table);

}  // namespace accelkit::config_detail
