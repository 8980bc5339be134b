#include "blas.hpp"

#include <accelkit/sdk/host_paths.hpp>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::cpu {
namespace {

using host::starts_with;
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// The path column of one maps line, or "" (anonymous mappings, [heap], ...).
std::string_view mapped_path(std::string_view line) {
  auto slash = line.find('/');
  if (slash == std::string_view::npos) return {};
  std::string_view p = line.substr(slash);
  if (auto del = p.find(" (deleted)"); del != std::string_view::npos) p = p.substr(0, del);
  return p;
}

std::string_view basename(std::string_view p) {
  auto s = p.rfind('/');
  return s == std::string_view::npos ? p : p.substr(s + 1);
}

std::string_view dirname_leaf(std::string_view p) {
  auto s = p.rfind('/');
  if (s == std::string_view::npos || s == 0) return {};
  return basename(p.substr(0, s));
}

// Kind of a file named libblas.so*, from the alternatives directory it lives in.
BlasInfo classify_libblas(std::string_view path) {
  BlasInfo b;
  b.path = std::string(path);
  std::string_view dir = dirname_leaf(path);
  b.name = std::string(dir);
  if (dir == "blas") {
    b.kind = BlasKind::reference;
    b.name = "reference";
  } else if (starts_with(dir, "openblas")) {
    b.kind = BlasKind::openblas;
  } else if (starts_with(dir, "blis")) {
    b.kind = BlasKind::blis;
  } else if (starts_with(dir, "atlas")) {
    b.kind = BlasKind::atlas;
  } else if (contains(dir, "mkl")) {
    b.kind = BlasKind::mkl;
  } else {
    b.kind = BlasKind::other;
    b.name = std::string(basename(path));
  }
  return b;
}

// "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3" -> "x86_64-linux-gnu".
std::string multiarch(std::string_view path) {
  auto s = path.rfind('/');
  if (s == std::string_view::npos) return {};
  std::string_view dir = path.substr(0, s);  // .../x86_64-linux-gnu/blas
  s = dir.rfind('/');
  if (s == std::string_view::npos) return {};
  std::string_view triplet = basename(dir.substr(0, s));
  return contains(triplet, "-linux-") ? std::string(triplet) : std::string();
}

}  // namespace

BlasInfo classify_blas(std::string_view maps) {
  BlasInfo found, fallback;
  std::size_t pos = 0;
  while (pos < maps.size()) {
    std::size_t nl = maps.find('\n', pos);
    if (nl == std::string_view::npos) nl = maps.size();
    std::string_view path = mapped_path(maps.substr(pos, nl - pos));
    pos = nl + 1;
    if (path.empty()) continue;
    std::string_view base = basename(path);
    // libblas.so.3 is the name LibTorch is linked against: whatever provides it wins.
    if (starts_with(base, "libblas.so")) {
      found = classify_libblas(path);
      break;
    }
    if (fallback.kind != BlasKind::not_found) continue;
    if (starts_with(base, "libmkl_rt") || starts_with(base, "libmkl_core")) {
      fallback = {BlasKind::mkl, "mkl", std::string(path), {}};
    } else if (starts_with(base, "libopenblas")) {
      fallback = {BlasKind::openblas, std::string(dirname_leaf(path)), std::string(path), {}};
      if (!starts_with(fallback.name, "openblas")) fallback.name = "openblas";
    } else if (starts_with(base, "libblis")) {
      fallback = {BlasKind::blis, "blis", std::string(path), {}};
    }
  }
  if (found.kind == BlasKind::not_found) found = fallback;
  if (found.kind == BlasKind::reference) {
    std::string triplet = multiarch(found.path);
    std::string alt = "libblas.so.3" + (triplet.empty() ? std::string() : "-" + triplet);
    found.warning =
        "LibTorch's fp32 matmul runs on the slow reference BLAS (" + found.path +
        "); fix: apt-get install libopenblas0-openmp (or: update-alternatives --config " + alt +
        ")";
  }
  return found;
}

BlasInfo detect_blas() {
  host::ReadResult r = host::read_file(procfs_path("self/maps"));
  if (!r.ok()) return {};
  return classify_blas(r.text);
}

const char* to_string(BlasKind kind) noexcept {
  switch (kind) {
    case BlasKind::not_found: return "not found";
    case BlasKind::reference: return "reference";
    case BlasKind::openblas: return "openblas";
    case BlasKind::blis: return "blis";
    case BlasKind::mkl: return "mkl";
    case BlasKind::atlas: return "atlas";
    case BlasKind::other: return "other";
  }
  return "other";
}

std::string blas_in_use(const BlasInfo& blas, const std::string& openblas_kernels) {
  switch (blas.kind) {
    case BlasKind::not_found: return "";
    case BlasKind::reference: return "reference BLAS";
    case BlasKind::openblas: return openblas_kernels.empty() ? "OpenBLAS" : "OpenBLAS " + openblas_kernels;
    case BlasKind::blis: return "BLIS";
    case BlasKind::mkl: return "MKL";
    case BlasKind::atlas: return "ATLAS";
    case BlasKind::other: break;
  }
  return blas.name.empty() ? "other" : blas.name;
}

}  // namespace accelkit::cpu
