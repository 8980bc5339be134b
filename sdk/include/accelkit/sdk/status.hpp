// accelkit::Status and accelkit::Result<T>: how errors cross the plugin boundary.
//
// Exceptions never cross it: every plugin entry point is noexcept and reports failure as a
// Status (or a Result<T> holding one). guarded() turns whatever a body throws - c10::Error
// and every std::exception derive from std::exception; anything else is caught too - into a
// Status, so a plugin author wraps each entry point's body in it.
//
// Thread-safety: plain values; no shared state.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace accelkit {

enum class StatusCode {
  ok,
  unavailable,        // the hardware, driver or library is not there
  not_supported,      // the plugin has no implementation of this
  invalid_argument,   // the caller asked for something malformed
  permission_denied,  // a sensor or device the process may not read
  internal,           // a bug or an unexpected failure (exceptions end up here)
};

inline const char* to_string(StatusCode c) noexcept {
  switch (c) {
    case StatusCode::ok: return "ok";
    case StatusCode::unavailable: return "unavailable";
    case StatusCode::not_supported: return "not supported";
    case StatusCode::invalid_argument: return "invalid argument";
    case StatusCode::permission_denied: return "permission denied";
    case StatusCode::internal: return "internal error";
  }
  return "unknown";
}

class Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const noexcept { return code_ == StatusCode::ok; }
  explicit operator bool() const noexcept { return is_ok(); }
  StatusCode code() const noexcept { return code_; }
  // Human-readable, one line, says what failed and (where known) what to do.
  const std::string& message() const noexcept { return message_; }

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

// Either a value or a non-ok Status. Accessing value() of an error is a programming error
// (std::bad_optional_access): check ok() first.
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}                       // NOLINT: implicit
  Result(Status status) : status_(std::move(status)) {                // NOLINT: implicit
    if (status_.is_ok()) status_ = Status(StatusCode::internal, "Result built from an ok Status without a value");
  }

  bool ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  const Status& status() const noexcept { return status_; }
  T& value() & { return value_.value(); }
  const T& value() const& { return value_.value(); }
  T&& value() && { return std::move(value_).value(); }
  T* operator->() { return &value_.value(); }
  const T* operator->() const { return &value_.value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

template <class T> struct is_result : std::false_type {};
template <class T> struct is_result<Result<T>> : std::true_type {};

// Runs body() and turns any exception into Status(internal, "<where>: <what>"), keeping the
// first line of what() (c10::Error appends a backtrace). body returns void or Status (gives
// Status), Result<T> (gives Result<T>), or a plain T (gives Result<T>).
template <class F>
auto guarded(const char* where, F&& body) noexcept {
  using R = std::invoke_result_t<F>;
  using Out = std::conditional_t<std::is_same_v<R, void> || std::is_same_v<R, Status>, Status,
                                 std::conditional_t<is_result<R>::value, R, Result<R>>>;
  auto fail = [&](const char* what) -> Out {
    std::string text(what);
    if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
    return Status(StatusCode::internal, std::string(where) + ": " + text);
  };
  try {
    if constexpr (std::is_same_v<R, void>) {
      body();
      return Status::ok();
    } else {
      return Out(body());
    }
  } catch (const std::exception& e) {
    try { return fail(e.what()); } catch (...) { std::terminate(); }
  } catch (...) {
    try { return fail("unknown exception"); } catch (...) { std::terminate(); }
  }
}

}  // namespace accelkit
