#include "accelkit/model_file.hpp"
#include "accelkit/runtime.hpp"

#include <dlfcn.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include <ATen/core/grad_mode.h>
#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include "accelkit/loader.hpp"
#include "accelkit/sdk/support/host_file.hpp"
#include "accelkit/sdk/torch_compat_aoti.hpp"
#include "model_archive.hpp"
#include "accelkit/host/elf_facts.hpp"
#include "accelkit/base/strings.hpp"

namespace accelkit {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxMessage = 300;

// LibTorch's messages carry C++ backtraces and source positions: the first line, capped.
std::string short_message(const std::string& what) {
  return text::torch_error_line(what, kMaxMessage);
}

using text::major_minor;

std::string record_text(caffe2::serialize::PyTorchStreamReader& reader, const std::string& name) {
  auto [data, size] = reader.getRecord(name);
  return std::string(static_cast<const char*>(data.get()), size);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// Whether this CPU runs code compiled for AOTInductor's instruction set `isa`; "" when it does,
// else why not. Inductor names a set as words, each a feature group the code was compiled with:
// "AVX2", "AVX512" (F, BW, VL, DQ), "AVX512 AVX512_VNNI", "AVX512 AVX512_VNNI AMX_TILE";
// "DEFAULT" needs nothing. An unknown word is refused: nothing can say the CPU runs it.
std::string torch_error_summary(const std::string& what, std::size_t max) { return text::torch_error_line(what, max); }

std::string cpu_isa_problem(const std::string& isa) {
#if defined(__x86_64__) || defined(__i386__)
  auto amx = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    // CPUID leaf 7: EDX bit 24 AMX-TILE, 22 AMX-BF16, 25 AMX-INT8.
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (d >> 24 & 1U) && (d >> 22 & 1U) && (d >> 25 & 1U);
  };
  std::string missing;
  std::istringstream words(isa);
  for (std::string word; words >> word;) {
    bool has = false;
    if (word == "DEFAULT") has = true;
    else if (word == "AVX2") has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    else if (word == "AVX512")
      has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    else if (word == "AVX512_VNNI") has = __builtin_cpu_supports("avx512vnni");
    else if (word == "AMX_TILE" || word == "AMX") has = amx();
    else return "'" + word + "' (of '" + isa + "') is not an x86 instruction set accelkit can check";
    if (!has) missing += (missing.empty() ? "" : ", ") + word;
  }
  return missing.empty() ? "" : "this CPU has no " + missing;
#else
  (void)isa;
  return {};  // the machine check guards other architectures
#endif
}

namespace {

// Before the package's library is loaded: the LibTorch it links and the LibTorch functions it
// calls must be this process's.
void check_package_library(caffe2::serialize::PyTorchStreamReader& reader, const std::string& record,
                           const std::string& path) {
  const std::string bytes = record_text(reader, record);
  char tmpl[] = "/tmp/accelkit-pt2-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) throw ModelFileError(path + ": cannot make a temporary file to examine the package's library");
  const bool written = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  std::string error;
  auto facts = written ? read_elf_facts(tmpl, &error, /*want_undefined=*/true) : std::nullopt;
  ::unlink(tmpl);
  if (!facts) throw ModelFileError(path + ": the package's compiled library is not readable: " + error);
  if (auto why = foreign_torch_library(*facts, host_torch_version()); !why.empty())
    throw ModelFileError(path + ": the package's library was " + why + "; export it again with this LibTorch's PyTorch");
  std::vector<std::string> missing;
  for (const auto& sym : facts->undefined) {
    const bool torch_symbol = starts_with(sym, "aoti_torch_") || starts_with(sym, "_ZN3c10") ||
                              starts_with(sym, "_ZN2at") || starts_with(sym, "_ZN5torch");
    if (torch_symbol && !::dlsym(RTLD_DEFAULT, sym.c_str())) missing.push_back(sym);
  }
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < std::min<std::size_t>(missing.size(), 3); ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 3) list += " and " + std::to_string(missing.size() - 3) + " more";
    throw ModelFileError(path + ": the package calls LibTorch functions this LibTorch " + host_torch_version() +
                         " lacks (" + list + "): it was made by a newer PyTorch; export it again with PyTorch " +
                         major_minor(host_torch_version()));
  }
}

class TorchScriptModel final : public InferenceModel {
 public:
  TorchScriptModel(ModelFileFacts facts, c10::Device device, torch::jit::Module module)
      : InferenceModel(std::move(facts), device), module_(std::move(module)) {
    module_.eval();
  }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    at::NoGradGuard no_grad;
    std::vector<c10::IValue> args;
    for (const auto& t : inputs) args.emplace_back(t.device() == device_ ? t : t.to(device_));
    c10::IValue out;
    try {
      out = module_.forward(args);
    } catch (const std::exception& e) {
      throw ModelFileError(facts_.path + ": the model refused its inputs: " + short_message(e.what()));
    }
    std::vector<at::Tensor> result;
    if (out.isTensor()) result.push_back(out.toTensor());
    else if (out.isTuple())
      for (const auto& v : out.toTupleRef().elements()) result.push_back(v.toTensor());
    else if (out.isTensorList())
      for (const auto& t : out.toTensorVector()) result.push_back(t);
    else throw ModelFileError(facts_.path + ": the model returns " + out.tagKind() + ", not tensors");
    return result;
  }

 private:
  torch::jit::Module module_;
};

class PackageModel final : public InferenceModel {
 public:
  PackageModel(ModelFileFacts facts, c10::Device device, std::unique_ptr<compat::AotiPackage> package)
      : InferenceModel(std::move(facts), device), package_(std::move(package)) {}
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> args;
    for (const auto& t : inputs) args.push_back(t.device() == device_ ? t : t.to(device_));
    try {
      return package_->run(args);
    } catch (const std::exception& e) {
      throw ModelFileError(facts_.path + ": the package refused its inputs: " + short_message(e.what()));
    }
  }

 private:
  std::unique_ptr<compat::AotiPackage> package_;
};

}  // namespace

const char* to_string(ModelFormat f) noexcept {
  return f == ModelFormat::aoti_package ? "pt2" : "torchscript";
}

std::string InferenceModel::describe() const {
  if (facts_.format == ModelFormat::torchscript)
    return "TorchScript (archive version " + std::to_string(facts_.archive_version) + ") on " + device_.str();
  return ".pt2 package (" + facts_.device + (facts_.cpu_isa.empty() ? "" : ", " + facts_.cpu_isa) +
         (facts_.torch_version.empty() ? "" : ", PyTorch " + facts_.torch_version) + ") on " + device_.str();
}

namespace {
ModelFileFacts archive_facts(const std::string& path, caffe2::serialize::PyTorchStreamReader& archive);
}  // namespace

ModelFileFacts inspect_model_file(const std::string& path) {
  // Opened without blocking and checked to be a regular file before a byte is read: a FIFO
  // given as a model never waits for a writer.
  const host::ReadResult head = host::read_file_upto(path, 4);
  if (head.error == ENOENT) throw ModelFileError(path + ": no such file");
  if (!head.ok()) throw ModelFileError(path + ": cannot be read: " + host::failure(head));
  if (head.text.size() < 4)
    throw ModelFileError(path + ": " + (head.text.empty() ? "empty" : "shorter than any model file") +
                         ": not a TorchScript file or .pt2 package");
  if (head.text != std::string("PK\x03\x04", 4))
    throw ModelFileError(path + ": not a TorchScript file or .pt2 package (not a zip archive)");
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    return archive_facts(path, reader);
  } catch (const ModelFileError&) {
    throw;
  } catch (const std::exception& e) {
    throw ModelFileError(model_archive::load_failure(path, "not a PyTorch archive", model_archive::message_of(e)));
  }
}

namespace {

// What the archive's records say it is (inspect_model_file).
ModelFileFacts archive_facts(const std::string& path, caffe2::serialize::PyTorchStreamReader& archive) {
  auto* reader = &archive;
  ModelFileFacts f;
  f.path = path;
  f.archive_version = reader->version();
  const auto records = reader->getAllRecords();
  auto has_prefix = [&](const std::string& prefix) {
    return std::any_of(records.begin(), records.end(), [&](const std::string& r) { return starts_with(r, prefix); });
  };
  if (reader->hasRecord("archive_format") && record_text(*reader, "archive_format") == "pt2") {
    f.format = ModelFormat::aoti_package;
    std::set<std::string> models;
    const std::string dir = "data/aotinductor/";
    for (const auto& r : records) {
      if (!starts_with(r, dir)) continue;
      const std::string rest = r.substr(dir.size());
      const std::string model = rest.substr(0, rest.find('/'));
      models.insert(model);
      if (ends_with(r, "wrapper_metadata.json") && f.device.empty()) {
        try {
          const auto meta = nlohmann::json::parse(record_text(*reader, r));
          f.device = meta.value("AOTI_DEVICE_KEY", "");
          f.cpu_isa = meta.value("AOTI_CPU_ISA", "");
          f.machine = meta.value("AOTI_MACHINE", "");
          f.torch_version = meta.value("torch_version", "");
        } catch (const std::exception& e) {
          throw ModelFileError(path + ": the package's metadata is damaged: " + short_message(e.what()));
        }
      }
    }
    f.models.assign(models.begin(), models.end());
    if (f.models.empty())
      throw ModelFileError(path + (has_prefix("models/") ? ": a torch.export program (torch.export.save), not an AOTInductor package"
                                                         : ": a .pt2 archive with no AOTInductor model inside") +
                           ": only AOTInductor packages run in C++; make one with "
                           "torch._inductor.aoti_compile_and_package(torch.export.export(model, args))");
    return f;
  }
  if (has_prefix("code/")) {
    f.format = ModelFormat::torchscript;
    return f;
  }
  if (reader->hasRecord("data.pkl"))
    throw ModelFileError(path + ": a torch.save archive (tensors or a state dict), not a model: save the model with "
                         "torch.jit.save(torch.jit.script(model)), or export it with torch.export and "
                         "torch._inductor.aoti_compile_and_package");
  throw ModelFileError(path + ": a zip archive that is neither TorchScript nor a .pt2 package");
}

}  // namespace

namespace {

torch::jit::Module load_checked_torchscript(const std::string& path, const c10::optional<c10::Device>& device) {
  const ModelFileFacts f = inspect_model_file(path);
  if (f.format == ModelFormat::aoti_package)
    throw ModelFileError(path + ": a .pt2 package (AOTInductor), not a TorchScript file: it runs through "
                         "accelkit::load_model, for inference only");
  // The code and pickles (small) are checked against their CRC-32 before LibTorch compiles and
  // runs them: a changed byte that still parses would otherwise run as the model's code. The
  // tensors' storages (data/<n>, the bulk of the file) are read as LibTorch reads them.
  const std::string damaged = model_archive::damaged_record(path, [](const std::string& record) {
    return !(starts_with(record, "data/") || starts_with(record, ".data/"));
  });
  if (!damaged.empty())
    throw ModelFileError(path + ": not a usable TorchScript file (" + model_archive::damaged_text(damaged) + ")");
  try {
    return torch::jit::load(path, device);
  } catch (const std::exception& e) {
    throw ModelFileError(model_archive::load_failure(path, "not a usable TorchScript file", model_archive::message_of(e)));
  }
}

}  // namespace

torch::jit::Module load_torchscript(const std::string& path) { return load_checked_torchscript(path, c10::nullopt); }

torch::jit::Module load_torchscript(const std::string& path, c10::Device device) {
  return load_checked_torchscript(path, device);
}

std::unique_ptr<InferenceModel> load_model_file(const std::string& path, c10::Device device,
                                                const std::string& model_name) {
  ModelFileFacts f = inspect_model_file(path);
  if (f.format == ModelFormat::torchscript)
    return std::make_unique<TorchScriptModel>(f, device, load_torchscript(path, device));

  // A package.
  if (!compat::AotiPackage::available)
    throw ModelFileError(path + ": a .pt2 package (AOTInductor) needs LibTorch >= 2.6; this accelkit is built against " +
                         host_torch_version());
  std::string model = model_name;
  if (model.empty()) model = f.models.size() == 1 ? f.models.front() : "model";
  if (std::find(f.models.begin(), f.models.end(), model) == f.models.end()) {
    std::string names;
    for (const auto& m : f.models) names += (names.empty() ? "" : ", ") + m;
    throw ModelFileError(path + ": no model '" + model + "' in the package (it holds: " + names + ")");
  }
  const std::string want = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  if (f.device != want)
    throw ModelFileError(path + ": the package was compiled for " + (f.device.empty() ? "an unknown device" : f.device) +
                         ", but the device here is " + device.str() + " (" + want +
                         "): export it again for " + want + ", or choose a " + f.device + " device");
  if (!f.torch_version.empty() && major_minor(f.torch_version) != major_minor(host_torch_version()))
    throw ModelFileError(path + ": the package was made by PyTorch " + f.torch_version + ", expected " +
                         major_minor(host_torch_version()) + ".x (this accelkit runs LibTorch " +
                         host_torch_version() + "): export it again with that PyTorch");
  struct utsname host {};
  if (!f.machine.empty() && ::uname(&host) == 0 && f.machine != host.machine)
    throw ModelFileError(path + ": the package was compiled for " + f.machine + " machines; this one is " +
                         host.machine);
  if (device.is_cpu()) {
    if (auto why = cpu_isa_problem(f.cpu_isa); !why.empty())
      throw ModelFileError(path + ": the package was compiled for " + f.cpu_isa + " and " + why +
                           "; export it again on (or for) this machine");
  }
  // AOTInductor checks a call's input shapes, strides and dtypes only when asked: without the
  // check, inputs of another shape run the compiled kernels out of bounds. Asked for here
  // (unless the process set it), before any package's library reads it.
  ::setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);
  // The model's records (its compiled library among them) against their CRC-32 before the
  // library is loaded into this process.
  const std::string model_dir = "data/aotinductor/" + model + "/";
  const std::string damaged =
      model_archive::damaged_record(path, [&](const std::string& record) { return starts_with(record, model_dir); });
  if (!damaged.empty())
    throw ModelFileError(path + ": not a loadable .pt2 package (" + model_archive::damaged_text(damaged) + ")");
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const auto& r : reader.getAllRecords())
      if (starts_with(r, "data/aotinductor/" + model + "/") && ends_with(r, ".so")) check_package_library(reader, r, path);
    auto package = std::make_unique<compat::AotiPackage>(path, model, device.has_index() ? device.index() : -1);
    return std::make_unique<PackageModel>(f, device, std::move(package));
  } catch (const ModelFileError&) {
    throw;
  } catch (const std::exception& e) {
    throw ModelFileError(model_archive::load_failure(path, "not a loadable .pt2 package", model_archive::message_of(e)));
  }
}

std::unique_ptr<InferenceModel> load_model(const Runtime& rt, const std::string& path, const std::string& model_name) {
  return load_model_file(path, rt.device(), model_name);
}

}  // namespace accelkit
