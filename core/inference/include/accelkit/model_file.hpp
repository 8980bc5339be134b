// A user's own model, from a file, for inference on the negotiated device:
//   TorchScript  torch.jit.save(torch.jit.script(m) or torch.jit.trace(m, x)), or
//                torch::jit::Module::save: loaded with torch::jit::load onto the device.
//   .pt2         an AOTInductor package (torch._inductor.aoti_compile_and_package of a
//                torch.export program): LibTorch >= 2.6; compiled for one device type (and,
//                on a CPU, one instruction set).
// The file is examined before anything is loaded (inspect_model_file): its format from its
// contents (not its name); for a package, the device and CPU instruction set it was compiled
// for, the PyTorch that made it (when the exporter recorded "torch_version" in
// aot_inductor.metadata), and its compiled library's needs (the LibTorch libraries it links,
// the aoti_torch_* functions it calls) - each checked against this process before the
// library is loaded, so a package made for another LibTorch or device is refused with
// found-vs-expected, never a crash or an undefined-symbol dump.
//
// Thread-safety: an InferenceModel runs one call at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/jit/api/module.h>

namespace accelkit {

class Runtime;

enum class ModelFormat { torchscript, aoti_package };
const char* to_string(ModelFormat f) noexcept;

// The file cannot be used here; what() says why (one or two lines, never a LibTorch dump).
class ModelFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a model file says about itself, read without loading it.
struct ModelFileFacts {
  std::string path;
  ModelFormat format = ModelFormat::torchscript;
  std::uint64_t archive_version = 0;  // the archive's format version record
  // Packages only:
  std::vector<std::string> models;    // model names inside ("model" unless named otherwise)
  std::string device;                 // the device type it was compiled for: "cpu", "cuda", ...
  std::string cpu_isa;                // on a CPU: the instruction set ("AVX2", "AVX512 AVX512_VNNI", ...)
  std::string machine;                // the architecture it was compiled on ("x86_64")
  std::string torch_version;          // the PyTorch that made it, when recorded; else ""
};

// Throws ModelFileError: missing or unreadable file, not a PyTorch archive, a torch.save
// archive (tensors, not a model), an archive of another kind.
ModelFileFacts inspect_model_file(const std::string& path);

// The line of a LibTorch error message that says what went wrong (c10::Error's first line,
// the TorchScript interpreter's last), shortened to one line of at most `max` characters.
std::string torch_error_summary(const std::string& what, std::size_t max = 300);

// Whether this CPU runs a package compiled for AOTInductor's instruction set `isa` (words such
// as "AVX2", "AVX512 AVX512_VNNI", "AVX512 AVX512_VNNI AMX_TILE"): "" when it does, else why
// not (the missing words, or a word it cannot check).
std::string cpu_isa_problem(const std::string& isa);

class InferenceModel {
 public:
  virtual ~InferenceModel() = default;
  const ModelFileFacts& facts() const noexcept { return facts_; }
  c10::Device device() const noexcept { return device_; }
  // One forward pass without autograd; inputs on another device are moved to the model's.
  // Throws ModelFileError with LibTorch's message, shortened, for inputs the model rejects.
  virtual std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) = 0;
  // "TorchScript (archive version 8) on cpu", ".pt2 package 'model' (cpu, AVX2, PyTorch 2.13.0) on cpu"
  std::string describe() const;

 protected:
  InferenceModel(ModelFileFacts facts, c10::Device device) : facts_(std::move(facts)), device_(device) {}
  ModelFileFacts facts_;
  c10::Device device_;
};

// A TorchScript file as a torch::jit::Module: the one way accelkit loads one (bench, report, the
// inference API). The file is examined first (inspect_model_file: a .pt2 package, a torch.save
// archive or anything else that is not TorchScript is refused for what it is), then loaded by
// torch::jit::load, onto `device` when given. Every failure is a ModelFileError of one line,
// at most about 300 characters, that names the file, says what it is not (a damaged or
// truncated archive, a damaged record: the one whose contents no longer match its checksum,
// a pickle or code record that does not parse) and quotes LibTorch shortened, never its
// backtrace. A TorchScript file runs code from the file: load only models you trust.
torch::jit::Module load_torchscript(const std::string& path);
torch::jit::Module load_torchscript(const std::string& path, c10::Device device);

// Loads `path` for inference on `device`. model_name picks a model inside a package ("" = the
// only one, or "model"). Throws ModelFileError saying why it cannot: everything
// inspect_model_file refuses, a package for another device type or instruction set, made by
// another PyTorch, needing libraries or functions this LibTorch lacks, LibTorch < 2.6 for a
// package, and LibTorch's own load error, shortened. Loading a package sets
// AOTI_RUNTIME_CHECK_INPUTS=1 in the environment unless the process set it: AOTInductor then
// refuses inputs of another shape, stride or dtype than the package was compiled for (run()
// throws) instead of running its kernels out of bounds; the check costs a few comparisons
// per input and call.
std::unique_ptr<InferenceModel> load_model_file(const std::string& path, c10::Device device,
                                                const std::string& model_name = "");

// The user's model file for inference on `rt`'s device (load_model_file). Run it under
// rt.autocast() for the negotiated precision.
std::unique_ptr<InferenceModel> load_model(const Runtime& rt, const std::string& path, const std::string& model_name = "");

}  // namespace accelkit
