// remat/version.h — the library version.
#pragma once

namespace remat {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace remat
