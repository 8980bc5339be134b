// Loader: discovery, the C handshake, and every way a plugin can be refused - each with its
// real cause in the record - while the host keeps loading the good ones.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "accelkit/loader.hpp"
#include "accelkit/version.hpp"
#include "accelkit/host/elf_facts.hpp"
#include "fixture_paths.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace loader_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

// `reason` says "found <found>" ... "expected <expected>", in that spirit: the found value
// somewhere after the word "found", the expected one somewhere after "expected".
bool says_found_expected(const std::string& reason, const std::string& found, const std::string& expected) {
  auto f = reason.find("found");
  auto e = reason.find("expected");
  return f != std::string::npos && e != std::string::npos && reason.find(found, f) != std::string::npos &&
         reason.find(expected, e) != std::string::npos;
}

std::string major_minor(const std::string& v) {
  auto first = v.find('.');
  return v.substr(0, v.find('.', first + 1));
}

std::vector<std::string> dir_paths(const std::vector<SearchDir>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) out.push_back(d.path);
  return out;
}

// Unsets every variable the loader reads, for the scope.
struct CleanLoaderEnv {
  ScopedEnv path{"ACCELKIT_PLUGIN_PATH", std::nullopt};
  ScopedEnv add{"ACCELKIT_ADD_PLUGIN_PATH", std::nullopt};
  ScopedEnv disable{"ACCELKIT_PLUGINS_DISABLE", std::nullopt};
};

bool root_sticky_tmp() {
  struct stat st {};
  return ::stat("/tmp", &st) == 0 && st.st_uid == 0 && (st.st_mode & S_ISVTX);
}

}  // namespace

TEST_CASE("host handshake expectations match the SDK the host was built with") {
  CHECK(host_torch_version() == ACCELKIT_TORCH_VERSION_STRING);
  CHECK(host_cxx_abi() == ACCELKIT_CXX_ABI_TAG);
  CHECK(to_string(PluginStatus::usable) == std::string("usable"));
  CHECK(to_string(PluginStatus::rejected) == std::string("rejected"));
  CHECK(to_string(PluginStatus::unavailable) == std::string("unavailable"));
}

TEST_CASE("the fixture tree itself is a safe place to load from") {
  INFO(fixture_root().string());
  CHECK(insecure_path_reason(fixture_plugin("cuda")).empty());
  CHECK(insecure_path_reason(fixture_dir("cuda")).empty());
}

TEST_CASE("a good plugin loads, reports its info and probes") {
  PluginRecord r = load_plugin_file(fixture_plugin("cuda"));
  INFO(r.reason);
  REQUIRE(r.status == PluginStatus::usable);
  CHECK(r.reason.empty());
  CHECK(r.name == "cuda");
  CHECK(r.path == fixture_plugin("cuda"));
  CHECK(r.version == "0.0.1-fixture");
  CHECK(r.description == "accelkit test fixture");
  CHECK(r.torch_version == host_torch_version());
  CHECK(r.cxx_abi == host_cxx_abi());
  REQUIRE(r.plugin);
  REQUIRE(r.probe.has_value());
  CHECK(r.probe->score == 50);
  REQUIRE(r.probe->devices.size() == 2);
  CHECK(r.probe->devices[0].id == "cuda:0");
  CHECK(r.probe->devices[1].id == "cuda:1");
  CHECK(r.probe->devices[1].kind == DeviceKind::discrete_gpu);
  CHECK(r.probe->devices[0].capabilities.has(Capability::bf16));
  CHECK(r.probe->devices[0].capabilities.has("compute_capability"));

  auto dev = r.plugin->open(1);
  REQUIRE(dev.ok());
  CHECK(dev.value()->info().id == "cuda:1");
  CHECK(dev.value()->optimizer().status().code() == StatusCode::not_supported);
  auto bad = r.plugin->open(7);
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::invalid_argument);

  SUBCASE("without probing") {
    PluginRecord q = load_plugin_file(fixture_plugin("rocm"), /*probe=*/false);
    CHECK(q.status == PluginStatus::usable);
    CHECK(q.plugin);
    CHECK_FALSE(q.probe.has_value());
  }
}

TEST_CASE("each bad plugin is refused with its real cause") {
  SUBCASE("missing file") {
    PluginRecord r = load_plugin_file(fixture_root().string() + "/nowhere/libaccelkit-nowhere.so");
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(icontains(r.reason, "no such file"));
    CHECK_FALSE(r.plugin);
  }
  SUBCASE("relative path") {
    PluginRecord r = load_plugin_file("cuda/libaccelkit-cuda.so");
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(icontains(r.reason, "absolute"));
  }
  SUBCASE("garbage named like a plugin") {
    PluginRecord r = load_plugin_file(fixture_plugin("garbage"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK((icontains(r.reason, "not an ELF") || icontains(r.reason, "not a shared object")));
    CHECK_FALSE(icontains(r.reason, "Bad file descriptor"));
  }
  SUBCASE("no entry symbol") {
    PluginRecord r = load_plugin_file(fixture_plugin("no-entry"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, ACCELKIT_PLUGIN_INFO_SYMBOL));
    CHECK_FALSE(r.plugin);
  }
  SUBCASE("unresolved symbol") {
    PluginRecord r = load_plugin_file(fixture_plugin("undefined-symbol"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, "undefined symbol: accelkit_fixture_missing_symbol"));
    CHECK_FALSE(icontains(r.reason, "Bad file descriptor"));
  }
  SUBCASE("ABI major too new") {
    PluginRecord r = load_plugin_file(fixture_plugin("abi-new"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(icontains(r.reason, "ABI"));
    CHECK(says_found_expected(r.reason, std::to_string(ACCELKIT_ABI_MAJOR + 1u), std::to_string(ACCELKIT_ABI_MAJOR)));
    CHECK_FALSE(r.plugin);
  }
  SUBCASE("ABI major too old") {
    PluginRecord r = load_plugin_file(fixture_plugin("abi-old"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(icontains(r.reason, "ABI"));
    CHECK(says_found_expected(r.reason, std::to_string(ACCELKIT_ABI_MAJOR - 1u), std::to_string(ACCELKIT_ABI_MAJOR)));
    CHECK_FALSE(r.plugin);
  }
  SUBCASE("short struct_size") {
    PluginRecord r = load_plugin_file(fixture_plugin("short-struct"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, "struct_size"));
    CHECK(says_found_expected(r.reason, std::to_string(ACCELKIT_PLUGIN_INFO_MIN_SIZE - sizeof(const char*)),
                              std::to_string(ACCELKIT_PLUGIN_INFO_MIN_SIZE)));
    CHECK_FALSE(r.plugin);
  }
  SUBCASE("LibTorch version mismatch") {
    PluginRecord r = load_plugin_file(fixture_plugin("torch-version"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(icontains(r.reason, "LibTorch"));
    CHECK(says_found_expected(r.reason, "0.4", major_minor(host_torch_version())));
    CHECK_FALSE(r.plugin);
  }
  SUBCASE("C++ ABI tag mismatch") {
    PluginRecord r = load_plugin_file(fixture_plugin("cxx-abi"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(says_found_expected(r.reason, "itanium/libstdc++/cxx11abi=7", host_cxx_abi()));
    CHECK_FALSE(r.plugin);
  }
  SUBCASE("the file's note names another LibTorch: refused before loading") {
    PluginRecord r = load_plugin_file(fixture_plugin("note-torch"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, "not loaded"));
    CHECK(says_found_expected(r.reason, "0.4.1", major_minor(host_torch_version())));
    CHECK(contains(r.reason, host_torch_version()));
    CHECK(r.torch_version == "0.4.1");
    CHECK_FALSE(r.plugin);
    CHECK(std::getenv("ACCELKIT_FIXTURE_LOADED_NOTE_TORCH") == nullptr);  // its constructor never ran
  }
  SUBCASE("it needs another LibTorch's libraries: refused before loading") {
    PluginRecord r = load_plugin_file(fixture_plugin("needs-other-torch"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, "another LibTorch"));
    CHECK(contains(r.reason, "libc10.so.99"));
    CHECK(contains(r.reason, host_torch_version()));
    CHECK_FALSE(r.plugin);
    CHECK(std::getenv("ACCELKIT_FIXTURE_LOADED_NEEDS_OTHER_TORCH") == nullptr);
  }
  SUBCASE("factory throws") {
    PluginRecord r = load_plugin_file(fixture_plugin("factory-throws"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(icontains(r.reason, "constructor"));
    CHECK(contains(r.reason, "fixture constructor exploded"));
    CHECK(r.name == "factory-throws");  // the handshake passed, so the name is the plugin's own
    CHECK_FALSE(r.plugin);
  }
  SUBCASE("probe fails") {
    PluginRecord r = load_plugin_file(fixture_plugin("probe-fails"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::unavailable);
    CHECK(contains(r.reason, "fixture probe: no such hardware"));
    CHECK(r.plugin);  // created; only its probe said no
    CHECK_FALSE(r.probe.has_value());
  }
  SUBCASE("probe throws inside capture") {
    PluginRecord r = load_plugin_file(fixture_plugin("probe-throws"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::unavailable);
    CHECK(contains(r.reason, "probe exploded"));
    CHECK_FALSE(contains(r.reason, "second line"));
    CHECK_FALSE(r.probe.has_value());
  }
  SUBCASE("score 0") {
    PluginRecord r = load_plugin_file(fixture_plugin("score-zero"));
    INFO(r.reason);
    CHECK(r.status == PluginStatus::unavailable);
    CHECK(contains(r.reason, "no driver"));
    REQUIRE(r.probe.has_value());
    CHECK(r.probe->score == 0);
    CHECK(r.probe->devices.size() == 1);
  }
}

TEST_CASE("one discovery over every bad plugin: each has its fate, the good ones still load") {
  // Good ones in the middle: bad plugins before them do not stop them, and they do not
  // change the fate of bad ones after them.
  const std::vector<std::pair<std::string, PluginStatus>> expected = {
      {"garbage", PluginStatus::rejected},          {"no-entry", PluginStatus::rejected},
      {"undefined-symbol", PluginStatus::rejected}, {"abi-new", PluginStatus::rejected},
      {"abi-old", PluginStatus::rejected},          {"short-struct", PluginStatus::rejected},
      {"factory-throws", PluginStatus::rejected},   {"cpu", PluginStatus::usable},
      {"rocm", PluginStatus::usable},               {"torch-version", PluginStatus::rejected},
      {"cxx-abi", PluginStatus::rejected},          {"probe-fails", PluginStatus::unavailable},
      {"probe-throws", PluginStatus::unavailable},  {"score-zero", PluginStatus::unavailable},
      {"note-torch", PluginStatus::rejected},       {"needs-other-torch", PluginStatus::rejected},
      {"cuda", PluginStatus::usable},
  };
  std::vector<std::string> dirs;
  for (const auto& [name, status] : expected) dirs.push_back(fixture_dir(name));

  Discovery d = discover_plugins(only_dirs(dirs));
  REQUIRE(d.plugins.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const PluginRecord& r = d.plugins[i];
    INFO(r.path << ": " << to_string(r.status) << " - " << r.reason);
    CHECK(r.path == fixture_plugin(expected[i].first));
    CHECK(r.status == expected[i].second);
    if (r.status == PluginStatus::usable) {
      CHECK(r.reason.empty());
      CHECK(r.plugin);
      CHECK(r.probe.has_value());
    } else {
      CHECK_FALSE(r.reason.empty());
    }
  }
  // And the process still loads a good plugin afterwards.
  CHECK(load_plugin_file(fixture_plugin("mps")).status == PluginStatus::usable);
}

TEST_CASE("insecure places are refused before anything is opened") {
  TempDir tmp("accelkit-loader");

  SUBCASE("world-writable directory") {
    fs::path dir = tmp.make_dir("open");
    std::string file = copy_to(fixture_plugin("cpu"), dir / "libaccelkit-cpu.so").string();
    CHECK(load_plugin_file(file).status == PluginStatus::usable);  // before: fine
    set_mode(dir, 0777);
    std::string why = insecure_path_reason(file);
    CHECK(contains(why, "writable by"));
    CHECK(contains(why, dir.string()));
    PluginRecord r = load_plugin_file(file);
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, "writable by"));

    Discovery d = discover_plugins(only_dirs({dir.string(), fixture_dir("rocm")}));
    REQUIRE(d.plugins.size() == 2);
    CHECK(d.plugins[0].status == PluginStatus::rejected);
    CHECK(contains(d.plugins[0].reason, "writable by"));
    CHECK(d.plugins[1].status == PluginStatus::usable);
  }
  SUBCASE("world-writable directory higher up") {
    fs::path dir = tmp.make_dir("up/and/down");
    std::string file = copy_to(fixture_plugin("cpu"), dir / "libaccelkit-cpu.so").string();
    set_mode(tmp.path() / "up", 0777);
    PluginRecord r = load_plugin_file(file);
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, "writable by"));
    CHECK(contains(r.reason, (tmp.path() / "up").string()));
  }
  SUBCASE("the check comes before dlopen") {
    // A file that would fail to load for another reason is refused as insecure instead:
    // nothing from an insecure place is ever opened.
    fs::path dir = tmp.make_dir("open");
    std::string file = copy_to(fixture_plugin("undefined-symbol"), dir / "libaccelkit-undefined-symbol.so").string();
    set_mode(dir, 0777);
    PluginRecord r = load_plugin_file(file);
    INFO(r.reason);
    CHECK(contains(r.reason, "writable by"));
    CHECK_FALSE(contains(r.reason, "undefined symbol"));
  }
  SUBCASE("group-writable file") {
    fs::path dir = tmp.make_dir("private");
    std::string file = copy_to(fixture_plugin("cpu"), dir / "libaccelkit-cpu.so").string();
    set_mode(dir, 0755);
    set_mode(file, 0664);
    PluginRecord r = load_plugin_file(file);
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, "writable by"));
    CHECK(contains(r.reason, file));
  }
  SUBCASE("world-writable file") {
    fs::path dir = tmp.make_dir("private");
    std::string file = copy_to(fixture_plugin("cpu"), dir / "libaccelkit-cpu.so").string();
    set_mode(file, 0646);
    PluginRecord r = load_plugin_file(file);
    INFO(r.reason);
    CHECK(r.status == PluginStatus::rejected);
    CHECK(contains(r.reason, "writable by"));
  }
  SUBCASE("a symlink in a world-writable directory") {
    // The link itself can be replaced by anyone, whatever it points at now.
    fs::path dir = tmp.make_dir("open");
    fs::path link = dir / "libaccelkit-cpu.so";
    fs::create_symlink(fixture_plugin("cpu"), link);
    set_mode(dir, 0777);
    Discovery d = discover_plugins(only_dirs({dir.string()}));
    REQUIRE(d.plugins.size() == 1);
    INFO(d.plugins[0].reason);
    CHECK(d.plugins[0].status == PluginStatus::rejected);
    CHECK(contains(d.plugins[0].reason, "writable by"));
  }
  SUBCASE("root's sticky /tmp is fine") {
    if (!root_sticky_tmp()) return;
    ScopedEnv tmpdir("TMPDIR", std::string("/tmp"));
    TempDir under_tmp("accelkit-loader-sticky");
    std::string file = copy_to(fixture_plugin("cpu"), under_tmp.path() / "libaccelkit-cpu.so").string();
    CHECK(insecure_path_reason(file).empty());
    CHECK(load_plugin_file(file).status == PluginStatus::usable);
  }
}

TEST_CASE("duplicates are loaded once and reported") {
  TempDir tmp("accelkit-loader");

  SUBCASE("two files, one plugin name, one directory") {
    fs::path dir = tmp.make_dir("twins");
    copy_to(fixture_plugin("cpu"), dir / "libaccelkit-cpu.so");
    copy_to(fixture_plugin("cpu"), dir / "libaccelkit-cpu-copy.so");
    Discovery d = discover_plugins(only_dirs({dir.string()}));
    REQUIRE(d.plugins.size() == 2);
    const PluginRecord& first = d.plugins[0];
    const PluginRecord& second = d.plugins[1];
    INFO(first.path << ": " << first.reason);
    INFO(second.path << ": " << second.reason);
    CHECK(first.status == PluginStatus::usable);
    CHECK(second.status == PluginStatus::rejected);
    CHECK(icontains(second.reason, "duplicate"));
    CHECK(contains(second.reason, first.path));  // says which one won
  }
  SUBCASE("one plugin name in two search directories") {
    fs::path dir = tmp.make_dir("later");
    std::string copy = copy_to(fixture_plugin("cuda"), dir / "libaccelkit-cuda.so").string();
    Discovery d = discover_plugins(only_dirs({fixture_dir("cuda"), dir.string()}));
    REQUIRE(d.plugins.size() == 2);
    CHECK(d.plugins[0].path == fixture_plugin("cuda"));
    CHECK(d.plugins[0].status == PluginStatus::usable);
    CHECK(d.plugins[1].path == copy);
    CHECK(d.plugins[1].status == PluginStatus::rejected);
    CHECK(icontains(d.plugins[1].reason, "duplicate"));
  }
  SUBCASE("the same directory twice") {
    Discovery d = discover_plugins(only_dirs({fixture_dir("cuda"), fixture_dir("cuda")}));
    std::size_t loaded = 0;
    for (const auto& r : d.plugins) {
      INFO(r.path << ": " << r.reason);
      if (r.status == PluginStatus::usable) ++loaded;
      else CHECK(icontains(r.reason, "duplicate"));
    }
    CHECK(loaded == 1);
  }
  SUBCASE("the same file through a symlinked directory") {
    fs::path link = tmp.path() / "link";
    fs::create_directory_symlink(fixture_dir("cuda"), link);
    Discovery d = discover_plugins(only_dirs({fixture_dir("cuda"), link.string()}));
    REQUIRE(d.plugins.size() == 2);
    CHECK(d.plugins[0].status == PluginStatus::usable);
    INFO(d.plugins[1].reason);
    CHECK(d.plugins[1].status == PluginStatus::rejected);
    CHECK(icontains(d.plugins[1].reason, "duplicate"));
  }
  SUBCASE("the same file through a symlink with another plugin-like name") {
    fs::path dir = tmp.make_dir("alias");
    fs::create_symlink(fixture_plugin("cuda"), dir / "libaccelkit-alias.so");
    Discovery d = discover_plugins(only_dirs({fixture_dir("cuda"), dir.string()}));
    REQUIRE(d.plugins.size() == 2);
    CHECK(d.plugins[0].status == PluginStatus::usable);
    INFO(d.plugins[1].reason);
    CHECK(d.plugins[1].status == PluginStatus::rejected);
    CHECK(icontains(d.plugins[1].reason, "duplicate"));
  }
}

TEST_CASE("search directories: environment, command line and defaults") {
  CleanLoaderEnv clean;
  const std::string a = fixture_dir("cuda"), b = fixture_dir("rocm"), c = fixture_dir("mps");

  SUBCASE("defaults: build-time and executable-relative, never the current directory") {
    auto dirs = plugin_search_dirs(LoaderOptions{});
    REQUIRE_FALSE(dirs.empty());
    bool exe_relative = false;
    for (const auto& d : dirs) {
      INFO(d.path << " (" << d.origin << ")");
      CHECK(fs::path(d.path).is_absolute());
      CHECK(fs::path(d.path) != fs::current_path());
      CHECK(d.origin != "ACCELKIT_PLUGIN_PATH");
      CHECK(d.origin != "ACCELKIT_ADD_PLUGIN_PATH");
      if (d.origin == "executable-relative") {
        exe_relative = true;
        CHECK(fs::path(d.path).lexically_normal().generic_string().find("/accelkit/plugins") != std::string::npos);
      }
    }
    CHECK(exe_relative);
    // The packages' directory comes last, when it is not the build-time one already.
    const bool same = std::string(ACCELKIT_PACKAGE_PLUGIN_DIR) == ACCELKIT_BUILDTIME_PLUGIN_DIR;
    CHECK((dirs.back().origin == "package") == !same);
    if (!same) CHECK(dirs.back().path == ACCELKIT_PACKAGE_PLUGIN_DIR);
  }
  SUBCASE("ACCELKIT_PLUGIN_PATH replaces the defaults") {
    ScopedEnv path("ACCELKIT_PLUGIN_PATH", a + ":" + b);
    ScopedEnv add("ACCELKIT_ADD_PLUGIN_PATH", c);
    auto dirs = plugin_search_dirs(LoaderOptions{});
    REQUIRE(dirs.size() == 2);
    CHECK(dirs[0].path == a);
    CHECK(dirs[1].path == b);
    CHECK(dirs[0].origin == "ACCELKIT_PLUGIN_PATH");
    CHECK(dirs[1].origin == "ACCELKIT_PLUGIN_PATH");

    LoaderOptions o;
    o.probe = false;
    Discovery d = discover_plugins(o);
    REQUIRE(d.plugins.size() == 2);
    CHECK(d.plugins[0].name == "cuda");
    CHECK(d.plugins[1].name == "rocm");
  }
  SUBCASE("ACCELKIT_ADD_PLUGIN_PATH is searched first, then the defaults") {
    ScopedEnv add("ACCELKIT_ADD_PLUGIN_PATH", c + ":" + a);
    auto dirs = plugin_search_dirs(LoaderOptions{});
    REQUIRE(dirs.size() > 2);
    CHECK(dirs[0].path == c);
    CHECK(dirs[1].path == a);
    CHECK(dirs[0].origin == "ACCELKIT_ADD_PLUGIN_PATH");
    CHECK(dirs[2].origin != "ACCELKIT_ADD_PLUGIN_PATH");
    LoaderOptions no_defaults;
    no_defaults.include_default_dirs = false;
    CHECK(dir_paths(plugin_search_dirs(no_defaults)) == std::vector<std::string>{c, a});
  }
  SUBCASE("--plugin-path wins over ACCELKIT_PLUGIN_PATH") {
    ScopedEnv path("ACCELKIT_PLUGIN_PATH", a);
    LoaderOptions o;
    o.cli_paths = {b};
    auto dirs = plugin_search_dirs(o);
    REQUIRE(dirs.size() == 1);
    CHECK(dirs[0].path == b);
    CHECK(dirs[0].origin == "--plugin-path");
  }
  SUBCASE("read_environment = false ignores the variables") {
    ScopedEnv path("ACCELKIT_PLUGIN_PATH", a);
    ScopedEnv add("ACCELKIT_ADD_PLUGIN_PATH", b);
    LoaderOptions o;
    o.read_environment = false;
    for (const auto& d : plugin_search_dirs(o)) {
      CHECK(d.path != a);
      CHECK(d.path != b);
    }
  }
  SUBCASE("relative and empty entries are ignored, never the current directory") {
    TempDir tmp("accelkit-loader-cwd");
    copy_to(fixture_plugin("cuda"), tmp.path() / "relative" / "libaccelkit-cuda.so");
    copy_to(fixture_plugin("rocm"), tmp.path() / "libaccelkit-rocm.so");
    ScopedCwd cwd(tmp.path());
    ScopedEnv path("ACCELKIT_PLUGIN_PATH", "relative::.:" + fixture_dir("cpu") + ":");
    Discovery d = discover_plugins(LoaderOptions{});
    REQUIRE(d.plugins.size() == 1);
    CHECK(d.plugins[0].name == "cpu");
    CHECK(d.plugins[0].status == PluginStatus::usable);
    for (const auto& dir : d.dirs) CHECK(fs::path(dir.path).is_absolute());
    CHECK(any_contains(d.trace, "relative"));  // said why it was skipped

    // With no variable at all the current directory is not searched either.
    ScopedEnv unset("ACCELKIT_PLUGIN_PATH", std::nullopt);
    LoaderOptions o;
    o.probe = false;
    for (const auto& r : discover_plugins(o).plugins) {
      INFO(r.path);
      CHECK(fs::path(r.path).parent_path() != tmp.path());
    }
  }
}

TEST_CASE("ACCELKIT_PLUGINS_DISABLE and disable_globs") {
  CleanLoaderEnv clean;
  const std::vector<std::string> dirs = {fixture_dir("cuda"), fixture_dir("cpu"), fixture_dir("rocm"),
                                         fixture_dir("mps")};
  auto fate = [](const Discovery& d, const std::string& name) -> const PluginRecord* {
    for (const auto& r : d.plugins)
      if (r.path == fixture_plugin(name)) return &r;
    return nullptr;
  };

  SUBCASE("globs from the environment") {
    std::string joined = join(dirs, ":");
    ScopedEnv path("ACCELKIT_PLUGIN_PATH", joined);
    ScopedEnv disable("ACCELKIT_PLUGINS_DISABLE", "c*,mp?");
    Discovery d = discover_plugins(LoaderOptions{});
    REQUIRE(d.plugins.size() == 4);
    for (std::string name : {"cuda", "cpu", "mps"}) {
      const PluginRecord* r = fate(d, name);
      REQUIRE(r);
      INFO(name << ": " << r->reason);
      CHECK(r->status == PluginStatus::rejected);
      CHECK(icontains(r->reason, "disabled"));
      CHECK_FALSE(r->plugin);
    }
    REQUIRE(fate(d, "rocm"));
    CHECK(fate(d, "rocm")->status == PluginStatus::usable);
  }
  SUBCASE("globs from the options") {
    LoaderOptions o = only_dirs(dirs);
    o.disable_globs = {"rocm"};
    Discovery d = discover_plugins(o);
    REQUIRE(fate(d, "rocm"));
    CHECK(fate(d, "rocm")->status == PluginStatus::rejected);
    CHECK(icontains(fate(d, "rocm")->reason, "disabled"));
    CHECK(fate(d, "cuda")->status == PluginStatus::usable);
  }
  SUBCASE("a glob matches the plugin's own name, not only the file name") {
    TempDir tmp("accelkit-loader");
    fs::path dir = tmp.make_dir("renamed");
    std::string file = copy_to(fixture_plugin("cuda"), dir / "libaccelkit-renamed.so").string();
    LoaderOptions o = only_dirs({dir.string()});
    o.disable_globs = {"cu*"};
    Discovery d = discover_plugins(o);
    REQUIRE(d.plugins.size() == 1);
    INFO(d.plugins[0].reason);
    CHECK(d.plugins[0].status == PluginStatus::rejected);
    CHECK(icontains(d.plugins[0].reason, "disabled"));
  }
  SUBCASE("environment globs are ignored when read_environment is false") {
    ScopedEnv disable("ACCELKIT_PLUGINS_DISABLE", "*");
    Discovery d = discover_plugins(only_dirs(dirs));
    for (const auto& r : d.plugins) CHECK(r.status == PluginStatus::usable);
  }
}

TEST_CASE("the trace names every directory and every file tried") {
  CleanLoaderEnv clean;
  const std::string missing = fixture_root().string() + "/no-such-dir";
  Discovery d = discover_plugins(only_dirs({fixture_dir("cuda"), missing, fixture_dir("garbage"),
                                            fixture_dir("undefined-symbol"), fixture_dir("cpu")}));
  INFO(join(d.trace));
  REQUIRE(d.dirs.size() == 5);
  CHECK(d.dirs[1].path == missing);
  CHECK(d.dirs[0].origin == "--plugin-path");
  for (const auto& dir : d.dirs) CHECK(any_contains(d.trace, dir.path));
  REQUIRE(d.plugins.size() == 4);
  for (const auto& r : d.plugins) {
    CHECK(any_contains(d.trace, r.path));
    if (!r.reason.empty()) CHECK(any_contains(d.trace, r.reason));
  }
  // What became of the missing directory is said, too.
  bool missing_explained = false;
  for (const auto& line : d.trace)
    if (contains(line, missing) && (icontains(line, "no such") || icontains(line, "not found") || icontains(line, "missing")))
      missing_explained = true;
  CHECK(missing_explained);
  // Files that do not look like plugins are not candidates.
  TempDir tmp("accelkit-loader");
  write_file(tmp.path() / "README.txt", "not a plugin");
  write_file(tmp.path() / "libaccelkit-.so", "empty name");
  copy_to(fixture_plugin("cpu"), tmp.path() / "libother.so");
  copy_to(fixture_plugin("cpu"), tmp.path() / "libaccelkit-cpu.so.1");
  CHECK(discover_plugins(only_dirs({tmp.str()})).plugins.empty());
}

TEST_CASE("the pre-load reader: a plugin's note and needed libraries, and damaged files") {
  SUBCASE("a plugin written with ACCELKIT_PLUGIN carries the note") {
    std::string error;
    auto facts = read_elf_facts(fixture_plugin("cuda"), &error);
    INFO(error);
    REQUIRE(facts.has_value());
    CHECK(facts->elf64_le);
    REQUIRE(facts->note.has_value());
    std::map<std::string, std::string> note;
    for (auto& [k, v] : parse_plugin_note(*facts->note)) note[k] = v;
    CHECK(note["accelkit-plugin-note"] == "1");
    CHECK(note["torch"] == host_torch_version());
    CHECK(note["cxx_abi"] == host_cxx_abi());
    CHECK(std::strtoul(note["abi"].c_str(), nullptr, 10) == ACCELKIT_ABI_MAJOR);
    // DT_NEEDED as the dynamic linker reads it (LibTorch's own only where the plugin calls
    // into it: Debian's LibTorch links with --as-needed; which C++ runtime libraries stay
    // depends on the toolchain, the C library always does).
    std::string needed;
    for (const auto& n : facts->needed) needed += n + " ";
    INFO("DT_NEEDED: " << needed);
    CHECK(std::find(facts->needed.begin(), facts->needed.end(), "libc.so.6") != facts->needed.end());
    auto stub = read_elf_facts(fixture_plugin("needs-other-torch"), nullptr);
    REQUIRE(stub.has_value());
    CHECK(std::find(stub->needed.begin(), stub->needed.end(), "libc10.so.99") != stub->needed.end());
    CHECK(torch_library_stem("libc10.so.99") == "libc10.so");
    CHECK(torch_library_stem("libtorch_cpu.so") == "libtorch_cpu.so");
    CHECK(torch_library_stem("libc10x.so") == "");
  }
  SUBCASE("a hand-written plugin without the note still reads") {
    auto facts = read_elf_facts(fixture_plugin("abi-new"), nullptr);
    REQUIRE(facts.has_value());
    CHECK_FALSE(facts->note.has_value());
  }
  SUBCASE("not ELF, truncated, missing") {
    std::string error;
    CHECK_FALSE(read_elf_facts(fixture_plugin("garbage"), &error).has_value());
    CHECK(contains(error, "no ELF header"));
    TempDir tmp("accelkit-elf");
    std::ifstream in(fixture_plugin("cuda"), std::ios::binary);
    std::string head(256, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    const auto cut = (tmp.path() / "cut.so").string();
    std::ofstream(cut, std::ios::binary).write(head.data(), static_cast<std::streamsize>(head.size()));
    error.clear();
    CHECK_FALSE(read_elf_facts(cut, &error).has_value());
    CHECK(contains(error, "out of the file's bounds"));
    error.clear();
    CHECK_FALSE(read_elf_facts((tmp.path() / "none.so").string(), &error).has_value());
    CHECK(contains(error, "cannot be read"));
  }
}

}  // namespace loader_suite
