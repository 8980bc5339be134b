// The baseline for bench/startup: a bare LibTorch program that prints its configuration.
// Linked to the same LibTorch libraries as the accelkit CLI (accelkit_torch), loaded the same
// way (at start).
//   bare_torch                  LibTorch version and what the build has (cheap queries)
//   bare_torch --threads        + the intra/inter-op thread pools (starts them)
//   bare_torch --show-config    + at::show_config()
#include <cstring>
#include <iostream>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/version.h>

int main(int argc, char** argv) {
  bool threads = false, config = false;
  for (int i = 1; i < argc; ++i) {
    threads |= std::strcmp(argv[i], "--threads") == 0;
    config |= std::strcmp(argv[i], "--show-config") == 0;
  }
  std::cout << "LibTorch " << TORCH_VERSION << '\n'
            << "MKL-DNN: " << (at::hasMKLDNN() ? "yes" : "no") << ", OpenMP: "
            << (at::hasOpenMP() ? "yes" : "no") << ", LAPACK: " << (at::hasLAPACK() ? "yes" : "no") << '\n';
  if (threads)
    std::cout << "intra-op threads: " << at::get_num_threads() << '\n'
              << "inter-op threads: " << at::get_num_interop_threads() << '\n';
  if (config) std::cout << at::show_config();
  return 0;
}
