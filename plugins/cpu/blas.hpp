// Which BLAS LibTorch's fp32 matmul runs on, from the process's memory map: Debian's
// LibTorch calls sgemm_ from libblas.so.3, which the alternatives system points at the
// reference (netlib) BLAS, OpenBLAS, BLIS or MKL. The reference one is 10-50x slower.
#pragma once

#include <string>
#include <string_view>

namespace accelkit::cpu {

enum class BlasKind { not_found, reference, openblas, blis, mkl, atlas, other };

struct BlasInfo {
  BlasKind kind = BlasKind::not_found;
  std::string name;     // "reference", "openblas-openmp", "mkl", ...; "" when not found
  std::string path;     // the mapped file that provides it; "" when not found
  std::string warning;  // set when kind == reference: what is wrong and the fix
};

// Pure: classifies the text of /proc/<pid>/maps.
BlasInfo classify_blas(std::string_view maps_text);

// Reads procfs_path("self/maps") (ACCELKIT_PROCFS_ROOT applies) and classifies it.
BlasInfo detect_blas();

const char* to_string(BlasKind kind) noexcept;

// What runs fp32 matmuls, for people: "MKL", "OpenBLAS SkylakeX" (with the kernel set in force,
// `openblas_kernels`, when OpenBLAS selects its kernels at run time), "BLIS", "reference BLAS";
// "" when no BLAS was found.
std::string blas_in_use(const BlasInfo& blas, const std::string& openblas_kernels);

}  // namespace accelkit::cpu
