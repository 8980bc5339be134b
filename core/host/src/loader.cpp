#include "install_layout.hpp"
#include "accelkit/loader.hpp"

#include <dlfcn.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <boost/dll/shared_library.hpp>
#include <spdlog/spdlog.h>

#include "accelkit/sdk/host_paths.hpp"
#include "accelkit/sdk/support/plausible.hpp"
#include "accelkit/decision_cache.hpp"
#include "accelkit/host/elf_facts.hpp"
#include "plugin_scan.hpp"
#include "accelkit/version.hpp"
#include "accelkit/base/strings.hpp"

namespace fs = std::filesystem;

namespace accelkit {

const char* to_string(PluginStatus s) noexcept {
  switch (s) {
    case PluginStatus::usable: return "usable";
    case PluginStatus::rejected: return "rejected";
    case PluginStatus::unavailable: return "unavailable";
  }
  return "rejected";
}

std::string host_torch_version() { return ACCELKIT_TORCH_VERSION_STRING; }
std::string host_cxx_abi() { return ACCELKIT_CXX_ABI_TAG; }

namespace {

constexpr std::string_view kPrefix = "libaccelkit-";
constexpr std::string_view kSuffix = ".so";

// Every library ever opened stays open for the life of the process.
std::vector<std::shared_ptr<boost::dll::shared_library>>& kept_libraries() {
  static auto* libs = new std::vector<std::shared_ptr<boost::dll::shared_library>>();
  return *libs;
}
std::mutex& kept_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string env_or_empty(const char* name) {
  const char* v = secure_env(name);
  return v ? std::string(v) : std::string();
}

using text::major_minor;

std::string mode_string(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

bool is_plugin_file_name(const std::string& file) {
  return file.size() > kPrefix.size() + kSuffix.size() && file.compare(0, kPrefix.size(), kPrefix) == 0 &&
         file.compare(file.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

std::string name_from_file(const std::string& path) {
  std::string file = fs::path(path).filename().string();
  if (!is_plugin_file_name(file)) return file;
  return file.substr(kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
}

// Why the file is not an ELF shared object we could open, or "".
std::string elf_problem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot be read: " + std::string(std::strerror(errno));
  unsigned char header[18] = {};
  in.read(reinterpret_cast<char*>(header), sizeof header);
  if (in.gcount() < 18 || std::memcmp(header, "\x7f" "ELF", 4) != 0)
  {
    std::error_code ec;
    return "not an ELF shared object (" + std::to_string(fs::file_size(path, ec)) + " bytes, no ELF header)";
  }
  const unsigned e_type = header[5] == 2 ? (header[16] << 8 | header[17]) : (header[16] | header[17] << 8);
  if (e_type != 3 /* ET_DYN */) return "an ELF file but not a shared object (e_type " + std::to_string(e_type) + ")";
  return {};
}

std::vector<std::string> match_globs(const std::vector<std::string>& globs, const std::string& name,
                                     const std::string& file) {
  std::vector<std::string> hits;
  for (const auto& g : globs)
    if (fnmatch(g.c_str(), name.c_str(), 0) == 0 || fnmatch(g.c_str(), file.c_str(), 0) == 0) hits.push_back(g);
  return hits;
}


// Why the file must not be loaded, judged from the file alone (its handshake note and the
// libraries it needs), or "". Fills rec's versions from the note.
std::string pre_load_problem(const std::string& path, PluginRecord& rec) {
  std::string error;
  auto facts = read_elf_facts(path, &error);
  if (!facts) return "not a readable ELF shared object: " + error;
  if (facts->note) {
    std::map<std::string, std::string> note;
    for (auto& [k, v] : parse_plugin_note(*facts->note)) note.emplace(k, v);
    const std::string abi = note["abi"];
    rec.torch_version = note["torch"];
    rec.cxx_abi = note["cxx_abi"];
    const std::string before = "handshake (read from the file, not loaded): ";
    if (abi.empty() || rec.torch_version.empty() || rec.cxx_abi.empty())
      return before + "the " ACCELKIT_PLUGIN_NOTE_SECTION " section lacks abi/torch/cxx_abi";
    const unsigned long abi_major = std::strtoul(abi.c_str(), nullptr, 10);
    if (abi_major != ACCELKIT_ABI_MAJOR)
      return before + "ABI major found " + std::to_string(abi_major) + " (" + abi + "), expected " +
             std::to_string(ACCELKIT_ABI_MAJOR) +
             (abi_major > ACCELKIT_ABI_MAJOR ? ": the plugin needs a newer accelkit" : ": rebuild the plugin against this SDK");
    if (major_minor(rec.torch_version) != major_minor(host_torch_version()))
      return before + "LibTorch found " + rec.torch_version + ", expected " + major_minor(host_torch_version()) +
             ".x (this host runs " + host_torch_version() + "): rebuild the plugin against this host's LibTorch";
    if (rec.cxx_abi != host_cxx_abi())
      return before + "C++ ABI tag found '" + rec.cxx_abi + "', expected '" + host_cxx_abi() + "'";
  }
  // Same version, another build (a wheel and a distribution's package of one release), or a
  // plugin without the note: the LibTorch libraries it needs must be the ones loaded here.
  if (auto why = foreign_torch_library(*facts, host_torch_version()); !why.empty())
    return why + "; rebuild the plugin against this host's LibTorch";
  return {};
}

// Decides, once the plugin's name is known, whether to go on: "" to continue, else why not.
using NameVeto = std::function<std::string(const std::string& name)>;

// Why the file must not even be opened, or "": path, type, permissions, ELF, handshake note.
std::string file_problem(const std::string& path, PluginRecord& rec) {
  std::error_code ec;
  if (!fs::path(path).is_absolute()) return "not an absolute path; only absolute paths are opened";
  if (!fs::exists(path, ec)) return "no such file";
  if (!fs::is_regular_file(path, ec)) return "not a regular file";
  if (auto why = insecure_path_reason(path); !why.empty()) return "refused as insecure: " + why;
  if (auto why = elf_problem(path); !why.empty()) return why;
  return pre_load_problem(path, rec);
}

// Loads the library for good (plugins are never unloaded), or says why it cannot be.
std::string open_library(const std::string& path, std::shared_ptr<boost::dll::shared_library>& lib) {
  // Our own dlopen first: it gives the real reason (Boost.DLL would say "Bad file descriptor").
  // The handle is never closed; Boost.DLL's load below only takes another reference.
  dlerror();
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    const char* err = dlerror();
    std::string text = err ? err : "dlopen failed";
    if (auto pos = text.find(path + ": "); pos == 0) text = text.substr(path.size() + 2);
    return "cannot be loaded: " + text;
  }
  lib = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code bec;
  lib->load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, bec);
  if (bec) return "cannot be loaded: " + bec.message();
  std::lock_guard<std::mutex> lock(kept_mutex());
  kept_libraries().push_back(lib);
  return {};
}

// The handshake: accelkit_plugin_info() read and compared with this host. Fills rec's name
// and versions; "" when it passes.
std::string handshake_problem(boost::dll::shared_library& lib, PluginRecord& rec) {
  if (!lib.has(ACCELKIT_PLUGIN_INFO_SYMBOL)) return "not an accelkit plugin: no '" ACCELKIT_PLUGIN_INFO_SYMBOL "' symbol";
  auto& info_fn = lib.get<const AccelkitPluginInfo*()>(ACCELKIT_PLUGIN_INFO_SYMBOL);
  const AccelkitPluginInfo* info = nullptr;
  try {  // a C entry point must not throw; a hand-written one may
    info = info_fn();
  } catch (const std::exception& e) {
    return ACCELKIT_PLUGIN_INFO_SYMBOL "() threw (a C entry point must not): " + text::shorten(e.what(), 160);
  } catch (...) {
    return ACCELKIT_PLUGIN_INFO_SYMBOL "() threw a non-standard exception (a C entry point must not)";
  }
  if (!info) return ACCELKIT_PLUGIN_INFO_SYMBOL "() returned NULL";
  if (info->struct_size < ACCELKIT_PLUGIN_INFO_MIN_SIZE)
    return "handshake: AccelkitPluginInfo.struct_size found " + std::to_string(info->struct_size) +
           ", expected at least " + std::to_string(ACCELKIT_PLUGIN_INFO_MIN_SIZE);
  if (info->abi_major != ACCELKIT_ABI_MAJOR)
    return "handshake: ABI major found " + std::to_string(info->abi_major) + " (" + std::to_string(info->abi_major) +
           "." + std::to_string(info->abi_minor) + "), expected " + std::to_string(ACCELKIT_ABI_MAJOR) +
           (info->abi_major > ACCELKIT_ABI_MAJOR ? ": the plugin needs a newer accelkit"
                                                 : ": rebuild the plugin against this SDK");
  if (!info->name || !*info->name || !info->version || !info->torch_version || !info->cxx_abi)
    return "handshake: AccelkitPluginInfo has a NULL or empty name/version/torch_version/cxx_abi";
  rec.name = info->name;
  rec.version = info->version;
  rec.torch_version = info->torch_version;
  rec.cxx_abi = info->cxx_abi;
  if (info->description) rec.description = info->description;
  if (major_minor(rec.torch_version) != major_minor(host_torch_version()))
    return "handshake: LibTorch found " + rec.torch_version + ", expected " + major_minor(host_torch_version()) +
           ".x (this host runs " + host_torch_version() + ")";
  if (rec.cxx_abi != host_cxx_abi())
    return "handshake: C++ ABI tag found '" + rec.cxx_abi + "', expected '" + host_cxx_abi() + "'";
  return {};
}

// The plugin object, from the library's factory; "" when created.
std::string create_plugin(const std::shared_ptr<boost::dll::shared_library>& lib, PluginRecord& rec) {
  if (!lib->has(ACCELKIT_PLUGIN_FACTORY_ALIAS))
    return "no '" ACCELKIT_PLUGIN_FACTORY_ALIAS "' factory (use ACCELKIT_PLUGIN(Class))";
  auto& factory = lib->get_alias<PluginFactory>(ACCELKIT_PLUGIN_FACTORY_ALIAS);
  Status err;
  Plugin* raw = nullptr;
  try {  // ACCELKIT_PLUGIN's factory catches; a hand-written one may not
    raw = factory(&err);
  } catch (const std::exception& e) {
    return "factory threw (it must return null with a Status instead): " + text::shorten(e.what(), 160);
  } catch (...) {
    return "factory threw a non-standard exception (it must return null with a Status instead)";
  }
  if (!raw) return "factory failed: " + (err.message().empty() ? std::string("returned null") : err.message());
  rec.plugin = std::shared_ptr<Plugin>(raw, [lib](Plugin* p) { delete p; });
  return {};
}

// Probes a created plugin; its status follows from the report (loaded: score > 0).
void probe_plugin(PluginRecord& rec, std::vector<std::string>* trace) {
  auto t0 = std::chrono::steady_clock::now();
  Result<ProbeReport> report = rec.plugin->probe();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (trace) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f ms", ms);
    trace->push_back("  probed '" + rec.name + "' in " + buf);
  }
  if (!report.ok()) {
    rec.status = PluginStatus::unavailable;
    rec.reason = "probe failed: " + report.status().message();
    return;
  }
  rec.probe = std::move(report).value();
  for (std::size_t i = 0; i < rec.probe->devices.size(); ++i) {
    DeviceInfo& d = rec.probe->devices[i];
    if (d.id.empty()) d.id = rec.name + ":" + std::to_string(i);
    // A fact the host acts on must be physically possible (sdk/support/plausible.hpp).
    if (!plausible::memory_bytes(d.memory_bytes)) {
      d.warnings.push_back("memory reported as " + std::to_string(d.memory_bytes) +
                           " bytes is implausible (above 64 TiB); treated as unknown");
      d.memory_bytes = 0;
    }
  }
  if (rec.probe->score <= 0) {
    rec.status = PluginStatus::unavailable;
    rec.reason = rec.probe->reasons.empty() ? "score 0: unusable here" : text::join(rec.probe->reasons, "; ");
    return;
  }
  rec.status = PluginStatus::usable;
}

// Checks, loads and creates the plugin at `path`; then, with `probe`, probes it as a
// separate step. A refusal at any step is the record's reason.
PluginRecord load_steps(const std::string& path, bool probe, const NameVeto& veto,
                        std::vector<std::string>* trace) {
  PluginRecord rec;
  rec.path = path;
  rec.name = name_from_file(path);
  auto reject = [&](std::string why) {
    rec.status = PluginStatus::rejected;
    rec.reason = std::move(why);
    return rec;
  };
  if (auto why = file_problem(path, rec); !why.empty()) return reject(why);
  std::shared_ptr<boost::dll::shared_library> lib;
  if (auto why = open_library(path, lib); !why.empty()) return reject(why);
  if (auto why = handshake_problem(*lib, rec); !why.empty()) return reject(why);
  if (veto) {
    if (auto why = veto(rec.name); !why.empty()) return reject(why);
  }
  if (auto why = create_plugin(lib, rec); !why.empty()) return reject(why);
  if (probe) {
    probe_plugin(rec, trace);
  } else {
    rec.status = PluginStatus::usable;
  }
  return rec;
}

// load_steps(), with anything a step throws (Boost.DLL, the file system) as the refusal.
PluginRecord load_impl(const std::string& path, bool probe, const NameVeto& veto, std::vector<std::string>* trace) {
  auto refused = [&](std::string why) {
    PluginRecord rec;
    rec.path = path;
    rec.name = name_from_file(path);
    rec.status = PluginStatus::rejected;
    rec.reason = std::move(why);
    return rec;
  };
  try {
    return load_steps(path, probe, veto, trace);
  } catch (const std::exception& e) {
    return refused("loading it failed: " + text::shorten(e.what(), 200));
  } catch (...) {
    return refused("loading it failed: a non-standard exception");
  }
}

std::string executable_dir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe.parent_path().string();
}

}  // namespace

namespace {
// Walks `p` and its parents; the first one writable by group/others (root-owned sticky
// directories excepted) is the reason. Symbolic links are judged by their directory, not
// their own (always 0777) mode.
std::string first_writable(const fs::path& p) {
  for (fs::path cur = p;; cur = cur.parent_path()) {
    struct stat st {};
    if (::lstat(cur.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) {
      bool writable = st.st_mode & (S_IWGRP | S_IWOTH);
      bool root_sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) && st.st_uid == 0;
      if (writable && !root_sticky_dir)
        return "'" + cur.string() + "' is writable by " + ((st.st_mode & S_IWOTH) ? "others" : "its group") +
               " (mode " + mode_string(st.st_mode) + ")";
    }
    if (cur == cur.parent_path() || cur.empty()) break;
  }
  return {};
}
}  // namespace

std::string insecure_path_reason(const std::string& path) {
  // The path as found (whoever can write its directories can swap a link there) and the file
  // it resolves to.
  fs::path as_found = fs::absolute(fs::path(path)).lexically_normal();
  if (auto why = first_writable(as_found); !why.empty()) return why;
  std::error_code ec;
  fs::path real = fs::weakly_canonical(as_found, ec);
  if (!ec && real != as_found) return first_writable(real);
  return {};
}

std::vector<SearchDir> plugin_search_dirs(const LoaderOptions& options) {
  std::vector<SearchDir> dirs;
  auto add_list = [&](const std::vector<std::string>& list, const char* origin) {
    for (const auto& d : list) dirs.push_back({d, origin});
  };
  if (!options.cli_paths.empty()) {
    add_list(options.cli_paths, "--plugin-path");
    return dirs;
  }
  if (options.read_environment) {
    if (auto replace = env_or_empty("ACCELKIT_PLUGIN_PATH"); !replace.empty()) {
      add_list(split(replace, ':'), "ACCELKIT_PLUGIN_PATH");
      return dirs;
    }
    add_list(split(env_or_empty("ACCELKIT_ADD_PLUGIN_PATH"), ':'), "ACCELKIT_ADD_PLUGIN_PATH");
  }
  if (options.include_default_dirs) {
    // Each place once, in this order (several of them are the same place in common layouts).
    auto add = [&](const std::string& path, const char* origin) {
      const std::string normal = fs::path(path).lexically_normal().string();
      for (const SearchDir& d : dirs)
        if (fs::path(d.path).lexically_normal().string() == normal) return;
      dirs.push_back({path, origin});
    };
    // The installed package this program was built against (install_layout.hpp), wherever
    // its prefix is now.
    if (const std::string d = install_layout::plugin_dir(); !d.empty()) add(d, "installed package");
    add(ACCELKIT_BUILDTIME_PLUGIN_DIR, "build-time");
    if (auto exe = executable_dir(); !exe.empty()) {
      // bin/../lib (the build tree, and installs whose libdir is lib), then bin/../<libdir>
      // when the install's libdir is another (lib/x86_64-linux-gnu below /usr).
      const fs::path prefix = fs::path(exe).parent_path();
      add((prefix / "lib" / "accelkit" / "plugins").string(), "executable-relative");
      if (std::string_view(ACCELKIT_INSTALL_LIBDIR) != "lib" && fs::path(ACCELKIT_INSTALL_LIBDIR).is_relative())
        add((prefix / ACCELKIT_INSTALL_LIBDIR / "accelkit" / "plugins").string(), "executable-relative");
    }
    // An application linked against the packaged core, built with another prefix than the
    // packages': their plugins.
    add(ACCELKIT_PACKAGE_PLUGIN_DIR, "package");
  }
  return dirs;
}

PluginRecord load_plugin_file(const std::string& path, bool probe) { return load_impl(path, probe, {}, nullptr); }

namespace {

// Says `line` once per process: a registry's problem, or the cpu plugin examined here after a
// timeout, would otherwise repeat at every discovery.
void warn_once(const std::string& line) {
  static std::mutex m;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(m);
  if (said.insert(line).second) spdlog::warn("{}", line);
}

// The plugins whose scan ran out of time in this process, by registry and file: a timeout
// recorded by an earlier run is scanned again at most once per run, not at every discovery.
class TimedOutHere {
 public:
  static bool contains(const std::string& registry, const std::string& plugin) {
    std::lock_guard<std::mutex> lock(mutex());
    return set().count(registry + '\n' + plugin) > 0;
  }
  static void add(const std::string& registry, const std::string& plugin) {
    std::lock_guard<std::mutex> lock(mutex());
    set().insert(registry + '\n' + plugin);
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<std::string>& set() {
    static std::set<std::string> s;
    return s;
  }
};

// The plugin every machine has, the fallback when no other device is usable (plugins/cpu):
// never left refused for running out of time alone.
bool is_fallback_plugin(const std::string& path) { return name_from_file(path) == "cpu"; }

// The out-of-process examination of one candidate: "" to go on loading it here, else why it
// is refused. Fills rec.scan.
class Examiner {
 public:
  explicit Examiner(const LoaderOptions& options) : options_(options) {
    if (!options.scan) {
      note_ = "plugins are examined in this process (plugin_scan = false): a crashing or hanging plugin takes the "
              "process with it";
      return;
    }
    std::string looked;
    scanner_ = scan::find_scanner(&looked);
    if (scanner_.empty()) {
      note_ = "no plugin scanner found, so plugins are examined in this process (a crashing plugin takes it "
              "down); looked: " + looked;
      spdlog::warn("{}", note_);
      return;
    }
    registry_.emplace(options.cache_dir ? *options.cache_dir : decision_cache_dir());
    note_ = "each new plugin file is examined first in a separate process (" + scanner_ + ")";
    if (!registry_->path().empty()) note_ += "; verdicts kept in " + registry_->path();
    else note_ += "; no cache directory, so nothing is kept between runs";
    if (!registry_->problem().empty())
      warn_once("plugin registry " + registry_->path() + " not used: " + registry_->problem() +
                "; examining every plugin again");
  }
  ~Examiner() {
    if (!registry_) return;
    if (std::string why = registry_->save(); !why.empty())
      warn_once("cannot write the plugin registry " + registry_->path() + ": " + text::shorten(why, 300));
  }
  const std::string& note() const noexcept { return note_; }

  // Examines every file of `paths` that needs it (needs_scan), several children at a time (as
  // many as there are CPUs): a cold start pays for the slowest, not for all of them.
  void prescan(const std::vector<std::string>& paths) {
    if (scanner_.empty()) return;
    std::vector<std::string> todo;
    for (const auto& path : paths) {
      PluginRecord probe_only;
      if (file_problem(path, probe_only).empty() && needs_scan(path)) todo.push_back(path);
    }
    if (todo.empty()) return;
    std::vector<scan::Verdict> verdicts(todo.size());
    const std::size_t width = std::max(1u, std::thread::hardware_concurrency());
    for (std::size_t begin = 0; begin < todo.size(); begin += width) {
      std::vector<std::thread> children;
      for (std::size_t i = begin; i < std::min(todo.size(), begin + width); ++i)
        children.emplace_back([&, i] { verdicts[i] = scan::scan_with_retry(scanner_, todo[i], limits()); });
      for (auto& t : children) t.join();
    }
    for (std::size_t i = 0; i < todo.size(); ++i) keep(todo[i], verdicts[i]);
  }

  std::string examine(const std::string& path, PluginRecord& rec, std::vector<std::string>& trace) {
    if (scanner_.empty()) return {};
    PluginRecord probe_only;  // the cheap checks first: what the file alone refuses needs no child
    if (!file_problem(path, probe_only).empty()) return {};
    std::optional<scan::Verdict> v;
    const auto fresh = fresh_.find(path);  // examined by prescan() just now
    if (fresh != fresh_.end()) v = fresh->second;
    else if (!needs_scan(path)) v = registry_->lookup(path);
    const bool recorded = v.has_value() && fresh == fresh_.end();
    if (!v) v = keep(path, scan::scan_with_retry(scanner_, path, limits()));
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f ms", v->ms);
    const std::string when = recorded ? "recorded " + v->scanned : std::string("examined now in ") + ms;
    trace.push_back("  " + path + ": out-of-process scan " + (v->passed ? "passed" : "failed") + " (" + when + ")" +
                    (v->timed_out ? ": ran out of time" : ""));
    if (v->passed) {
      rec.scan = "passed (" + when + (v->note.empty() ? "" : "; " + v->note) + ")";
      return {};
    }
    rec.scan = "failed (" + when + "): " + v->reason;
    if (!v->timed_out)
      return "examined in a separate process, it " + v->reason +
             "; refused until the file changes (accelkit plugins --rescan examines it again)";
    if (!is_fallback_plugin(path))
      return "examined in a separate process, it " + v->reason + " (a timeout: it will be scanned again on the next run)";
    rec.scan += "; examined in this process instead, as the cpu plugin is the fallback every machine has";
    warn_once("plugin " + path + ": its out-of-process scan " + v->reason +
              "; examined in this process instead, as the cpu plugin is the fallback every machine has (the next run "
              "scans it again)");
    return {};
  }

 private:
  scan::ScanLimits limits() const { return {options_.scan_timeout_s, options_.scan_memory_bytes}; }

  // Whether `path` is to be scanned: asked to (rescan), no verdict for this version of the
  // file, or a timeout recorded by another run (at most once in this one).
  bool needs_scan(const std::string& path) const {
    if (options_.rescan) return true;
    const std::optional<scan::Verdict> v = registry_->lookup(path);
    return !v || (v->timed_out && !TimedOutHere::contains(registry_->path(), path));
  }

  // A verdict reached now: recorded, and not reached again in this discovery nor, when it is a
  // timeout, in this run.
  const scan::Verdict& keep(const std::string& path, scan::Verdict v) {
    registry_->record(path, v);
    if (v.timed_out) TimedOutHere::add(registry_->path(), path);
    return fresh_[path] = std::move(v);
  }

  const LoaderOptions& options_;
  std::string scanner_;
  std::string note_;
  std::optional<scan::Registry> registry_;
  std::map<std::string, scan::Verdict> fresh_;
};

// The plugin files of every search directory, in search order (what discover_plugins visits).
std::vector<std::string> candidate_files(const std::vector<SearchDir>& dirs) {
  std::vector<std::string> out;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::path(dir.path).is_absolute() || !fs::is_directory(dir.path, ec)) continue;
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir.path, ec))
      if (is_plugin_file_name(entry.path().filename().string())) files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

}  // namespace

Discovery discover_plugins(const LoaderOptions& options) {
  Discovery out;
  std::vector<std::string> globs = options.disable_globs;
  if (options.read_environment) {
    for (auto& g : split(env_or_empty("ACCELKIT_PLUGINS_DISABLE"), ',')) globs.push_back(g);
  }
  Examiner examiner(options);
  out.scan_note = examiner.note();
  {  // disabled plugins are never run, not even in a child
    std::vector<std::string> files = candidate_files(plugin_search_dirs(options));
    files.erase(std::remove_if(files.begin(), files.end(),
                               [&](const std::string& f) {
                                 return !match_globs(globs, name_from_file(f), fs::path(f).filename().string()).empty();
                               }),
                files.end());
    examiner.prescan(files);
  }
  std::set<std::string> seen_real;
  std::map<std::string, std::string> seen_name;  // name -> path

  for (const auto& dir : plugin_search_dirs(options)) {
    if (!fs::path(dir.path).is_absolute()) {
      out.trace.push_back(dir.path + " (" + dir.origin + "): ignored, not an absolute path");
      continue;
    }
    out.dirs.push_back(dir);
    std::error_code ec;
    if (!fs::is_directory(dir.path, ec)) {
      out.trace.push_back(dir.path + " (" + dir.origin + "): no such directory");
      continue;
    }
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir.path, ec)) {
      std::string file = entry.path().filename().string();
      if (is_plugin_file_name(file)) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    out.trace.push_back(dir.path + " (" + dir.origin + "): " + std::to_string(files.size()) + " candidate(s)");

    for (const auto& path : files) {
      std::string file = fs::path(path).filename().string();
      auto real = fs::weakly_canonical(path, ec).string();
      PluginRecord rec;
      if (!seen_real.insert(real).second) {
        rec.path = path;
        rec.name = name_from_file(path);
        rec.reason = "duplicate: the same file (" + real + ") was found earlier";
      } else if (auto hits = match_globs(globs, name_from_file(path), file); !hits.empty()) {
        rec.path = path;
        rec.name = name_from_file(path);
        rec.reason = "disabled by ACCELKIT_PLUGINS_DISABLE ('" + hits.front() + "')";
      } else {
        NameVeto veto = [&](const std::string& name) -> std::string {
          if (auto it = seen_name.find(name); it != seen_name.end())
            return "duplicate: a plugin named '" + name + "' was already found at " + it->second;
          if (auto h = match_globs(globs, name, file); !h.empty())
            return "disabled by ACCELKIT_PLUGINS_DISABLE ('" + h.front() + "')";
          return {};
        };
        PluginRecord scanned;
        if (std::string why = examiner.examine(path, scanned, out.trace); !why.empty()) {
          rec = std::move(scanned);
          rec.path = path;
          rec.name = name_from_file(path);
          rec.status = PluginStatus::rejected;
          rec.reason = std::move(why);
        } else {
          rec = load_impl(path, options.probe, veto, &out.trace);
          rec.scan = std::move(scanned.scan);
        }
        if (rec.plugin) seen_name.emplace(rec.name, path);
      }
      out.trace.push_back("  " + path + ": " + to_string(rec.status) + (rec.reason.empty() ? "" : " - " + rec.reason));
      if (rec.status == PluginStatus::rejected)
        spdlog::debug("plugin {} rejected: {}", path, rec.reason);
      out.plugins.push_back(std::move(rec));
    }
  }
  return out;
}

}  // namespace accelkit
