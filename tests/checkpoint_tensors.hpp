// The model's tensors in a checkpoint payload written by `accelkit train` (the trainer's
// archive: "model" holds them), by dotted name - for the suites that compare trained weights.
#pragma once

#include <map>
#include <string>

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>

#include <doctest/doctest.h>

namespace accelkit::test {

inline void collect_tensors(torch::serialize::InputArchive& archive, const std::string& prefix,
                            std::map<std::string, at::Tensor>& out) {
  for (const auto& key : archive.keys()) {
    at::Tensor t;
    torch::serialize::InputArchive child;
    if (archive.try_read(key, t)) out[prefix + key] = t;
    else if (archive.try_read(key, child)) collect_tensors(child, prefix + key + ".", out);
  }
}

inline std::map<std::string, at::Tensor> model_tensors(const std::string& payload) {
  torch::serialize::InputArchive root, model;
  root.load_from(payload.data(), payload.size());
  REQUIRE(root.try_read("model", model));
  std::map<std::string, at::Tensor> out;
  collect_tensors(model, "", out);
  return out;
}

}  // namespace accelkit::test
