// Why a model file LibTorch could not load cannot be loaded, in one line (model_file.cpp).
//
// LibTorch's own messages carry a C++ backtrace, source positions, advice about "your
// checkpoint file" and requests for enhancement reports; a TorchScript parse error spans three
// lines with the offending bytes. What a user needs is the file, what it is not, and LibTorch's
// reason shortened: load_failure() says that. When the archive's zip directory can still be
// read, it also names the record whose contents no longer match the CRC-32 the archive recorded
// for it (a byte changed after the file was saved), which LibTorch's reader does not check;
// damaged_record() is also the check model_file.cpp makes before a file's code runs.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <string>

namespace accelkit::model_archive {

// The exception's message without a backtrace: c10::Error's what_without_backtrace(), or what()
// cut before LibTorch's "Exception raised from" and "frame #" lines.
std::string message_of(const std::exception& e);

// LibTorch's message as one line of at most `max` characters: the line that says what went
// wrong, without the advice sentences, the "(Could this error message be improved?" request,
// the "(Triggered internally" position and the TorchScript source excerpt.
std::string libtorch_quote(const std::string& what, std::size_t max);

// The first record of the PyTorch archive at `path` whose contents do not match their recorded
// CRC-32, with "" when all that were checked match or the archive's directory cannot be read.
// Only records `which` accepts (by name inside the archive: "data.pkl", "code/...") are read,
// all when it is empty; records over 512 MiB are not.
std::string damaged_record(const std::string& path, const std::function<bool(const std::string&)>& which = {});

// The sentence load_failure and the checks before a load use: "a damaged record: R does not
// match its checksum, so it changed after saving".
std::string damaged_text(const std::string& record);

// One line, at most about 300 characters: "<path>: <what> (<what it is>; LibTorch <v>: <quote>)".
// `what_it_is_not` is the sentence's head ("not a usable TorchScript file"), `what` LibTorch's
// message (message_of()).
std::string load_failure(const std::string& path, const std::string& what_it_is_not, const std::string& what);

}  // namespace accelkit::model_archive
