// The accelkit executable. It links no LibTorch: it first loads the LibTorch this build was made
// against and checks that the one found is that one, then runs the command line from the CLI
// module (libaccelkit-cli.so, cli_entry.cpp). Linked directly, a different LibTorch found first
// (LD_LIBRARY_PATH, a venv upgraded in place, a removed one with Debian's in /usr/lib) stops the
// dynamic loader with "undefined symbol: ..." before any line of accelkit runs; here the user
// reads both versions instead.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>

#include "launcher_config.h"  // generated: the build's LibTorch and the CLI module's places

namespace {

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "2.13.0+cpu" -> "2.13.0"; "1.13" stays.
std::string release_of(const std::string& v) { return v.substr(0, v.find_first_of("+ \t")); }

// The version of the LibTorch whose libc10 is at `lib` (a real path), from what each kind of
// LibTorch keeps beside it: a Python package's torch/version.py, an unpacked libtorch archive's
// build-version, a distribution's versioned file name (libc10.so.1.13.0). "" when none says.
std::string torch_version_at(const std::string& lib) {
  const std::string torch_root = dir_of(dir_of(lib));
  std::ifstream py(torch_root + "/version.py");
  for (std::string line; std::getline(py, line);) {
    if (line.rfind("__version__", 0) != 0) continue;
    const std::size_t q = line.find_first_of("'\"");
    const std::size_t e = q == std::string::npos ? q : line.find(line[q], q + 1);
    if (e != std::string::npos) return release_of(line.substr(q + 1, e - q - 1));
  }
  if (std::string v = first_line(torch_root + "/build-version"); !v.empty()) return release_of(v);
  const std::string name = lib.substr(lib.rfind('/') + 1);
  const std::size_t so = name.find(".so.");
  return so == std::string::npos ? "" : name.substr(so + 4);
}

// Versions agree when the shorter one is a prefix of the other at a dot ("1.13" and "1.13.0").
bool same_release(const std::string& a, const std::string& b) {
  const std::string& s = a.size() < b.size() ? a : b;
  const std::string& l = a.size() < b.size() ? b : a;
  return l.compare(0, s.size(), s) == 0 && (l.size() == s.size() || l[s.size()] == '.');
}

int refuse(const std::string& found_path, const std::string& found_version) {
  const std::string built = ACCELKIT_TORCH_C10;
  std::string hint;
  if (std::getenv("LD_LIBRARY_PATH"))
    hint = "LD_LIBRARY_PATH is searched first: unset it, or take that LibTorch's directory out of it";
  else if (access(built.c_str(), F_OK) != 0)
    hint = "the LibTorch it was built against is gone (" + built + "): set it up again (scripts/setup)";
  else if (real_path(built) == found_path)
    hint = "the LibTorch at " + dir_of(built) + " was replaced: rebuild accelkit (scripts/setup)";
  else
    hint = "its own LibTorch is not found first: rebuild accelkit against the one found (scripts/setup --torch DIR)";
  std::fprintf(stderr, "accelkit: built against LibTorch %s (%s), but the LibTorch found is %s (%s): they do not mix\n  %s\n",
               ACCELKIT_TORCH_VERSION, built.c_str(), found_version.empty() ? "of unknown version" : found_version.c_str(),
               found_path.c_str(), hint.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // A write past the file-size limit (ulimit -f, as batch systems set it) fails with EFBIG, so
  // that the command stops with the file named and "File too large" and no temporary file left,
  // instead of dying of SIGXFSZ half-way through it. Ignored, it stays so in the workers that
  // `train --nproc-per-node` starts (this same executable).
  std::signal(SIGXFSZ, SIG_IGN);
  // The LibTorch: through this executable's own search path (RUNPATH to the build's LibTorch
  // where it is not in the system's directories), as the CLI module's would find it.
  void* c10 = dlopen(ACCELKIT_C10_SONAME, RTLD_LAZY | RTLD_GLOBAL);
  if (!c10) {
    const char* why = dlerror();
    std::fprintf(stderr, "accelkit: cannot load LibTorch %s (built against %s): %s\n", ACCELKIT_TORCH_VERSION,
                 ACCELKIT_TORCH_C10, why ? why : "unknown error");
    return 1;
  }
  link_map* map = nullptr;
  std::string other;  // a LibTorch of the same version found elsewhere: named if the CLI fails to load
  if (dlinfo(c10, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) {
    const std::string found = real_path(map->l_name);
    const std::string version = torch_version_at(found);
    const bool same_file = found == real_path(ACCELKIT_TORCH_C10);
    if (version.empty() ? !same_file : !same_release(version, ACCELKIT_TORCH_VERSION)) return refuse(found, version);
    if (!same_file) other = found;
  }

  // The CLI module: installed in <libdir>/accelkit, in the build tree in lib/accelkit.
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    std::fprintf(stderr, "accelkit: cannot find this program's own file (/proc/self/exe)\n");
    return 1;
  }
  exe[n] = '\0';
  const std::string bin = dir_of(exe);
  std::string tried;
  for (const char* rel : {ACCELKIT_CLI_MODULE_INSTALLED, ACCELKIT_CLI_MODULE_BUILD_TREE}) {
    const std::string path = bin + "/" + rel;
    if (access(path.c_str(), F_OK) != 0) {
      tried += "\n  " + path + ": not there";
      continue;
    }
    void* cli = dlopen(path.c_str(), RTLD_LAZY | RTLD_GLOBAL);
    if (!cli) {
      const char* why = dlerror();
      std::fprintf(stderr, "accelkit: cannot load %s: %s\n", path.c_str(), why ? why : "unknown error");
      if (!other.empty())
        std::fprintf(stderr, "  the LibTorch found (%s) says it is %s, as the build's (%s), but is another file%s\n",
                     other.c_str(), ACCELKIT_TORCH_VERSION, ACCELKIT_TORCH_C10,
                     std::getenv("LD_LIBRARY_PATH") ? "; LD_LIBRARY_PATH is searched first" : "");
      return 1;
    }
    using Entry = int (*)(int, char**);
    auto entry = reinterpret_cast<Entry>(dlsym(cli, "accelkit_cli_main"));
    if (!entry) {
      std::fprintf(stderr, "accelkit: %s has no accelkit_cli_main: not this accelkit's CLI module\n", path.c_str());
      return 1;
    }
    return entry(argc, argv);
  }
  std::fprintf(stderr, "accelkit: the CLI module is missing; looked for:%s\n", tried.c_str());
  return 1;
}
