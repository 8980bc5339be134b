// Calls into plugin code that is allowed to throw (the few SDK functions that are not
// noexcept: Optimizer::implementation() and adamw_implementations(),
// CapturedStep::fallback_reason()): an exception becomes a PluginCallError naming the plugin
// and the call, which the host handles like any of its own errors. (A noexcept entry point
// that throws ends the process in std::terminate; the out-of-process scan is what survives
// that, for the handshake and the probe.)
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "accelkit/base/strings.hpp"

namespace accelkit {

class PluginCallError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class F>
auto call_plugin(const std::string& who, const char* call, F&& f) -> decltype(f()) {
  try {
    return std::forward<F>(f)();
  } catch (const PluginCallError&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    throw PluginCallError(who + ": " + call + " threw: " + text::shorten(what, 200));
  } catch (...) {
    throw PluginCallError(who + ": " + call + " threw a non-standard exception");
  }
}

}  // namespace accelkit
