#include "config_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "toml_text.hpp"

namespace accelkit::config_detail {

namespace {

std::atomic<std::size_t> g_parses{0};

struct Entry {
  std::string text;
  ParsedConfig parsed;
};

std::mutex g_mutex;
std::map<std::string, Entry>& cache() {
  static std::map<std::string, Entry> entries;
  return entries;
}

}  // namespace

ParsedConfig parse_config(const std::string& path) {
  ParsedConfig out;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    out.read_error = "is a directory";
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.read_error = std::strerror(errno);
    return out;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    out.read_error = "read error";
    return out;
  }
  std::string text = buffer.str();

  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = cache().find(path);
  if (it != cache().end() && it->second.text == text) return it->second.parsed;
  ++g_parses;
  try {
    out.root = std::make_shared<const toml::table>(toml::parse(text, path));
  } catch (const toml::parse_error& e) {
    out.parse_error = toml_position(path, e.source()) + ": invalid TOML: " + std::string(e.description());
  }
  cache()[path] = Entry{std::move(text), out};
  return out;
}

std::size_t parse_count() noexcept { return g_parses.load(); }

std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> items;
  for (auto&& [k, n] : table) items.emplace_back(&k, &n);
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    const auto &pa = a.first->source().begin, &pb = b.first->source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  });
  return items;
}

}  // namespace accelkit::config_detail
