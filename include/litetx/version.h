// litetx/version.h — the version of the litetx library linked into the program.
//
// The version is the one of the CMake project (project(litetx VERSION ...)); the CMake
// package (find_package(litetx 0.1)), the pkg-config files (pkg-config --modversion litetx)
// and `litetx --version` report the same string.
#pragma once

namespace litetx {

// "MAJOR.MINOR.PATCH" of the library this program is linked with, e.g. "0.1.0". The returned
// string is static: it is never freed and never changes.
const char* Version() noexcept;

}  // namespace litetx
