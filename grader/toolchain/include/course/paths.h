// Planner paths: which branches of a launcher or planner this process took (tests/test_coverage_paths.py).
//
// A launcher marks a branch with `course::took<scalar_t>("v5.splitk")` (recorded as "v5.splitk/float32")
// or, for a branch the same in every dtype, `course::took("v4.streamk")`. The grader reads the set after
// grading (COURSE_PATHS_OUT, grader/verify/paths.py) through `course_paths_taken()`, defined in course/ops.h,
// and a test fails for a branch a spec declares that no checked call took. Host code only; included by
// course/cuda.cuh and course/ops.h, so both the kernel files and the binding files may mark branches.
//
// One set per library: every function here has hidden visibility, so each exercise's .so keeps its own
// (default visibility would make GCC's function-local static a process-wide STB_GNU_UNIQUE object, and
// a library loaded with RTLD_GLOBAL could bind another's calls to its own set: a student's build and the
// reference are loaded side by side), while the library's own .cu and .cpp files share it (an inline
// function's static is merged by the linker). The cost is a string and a
// hash lookup under a mutex, beside a launch's microseconds.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <type_traits>

// the scalar types a launcher may be instantiated with, declared only (their headers are heavy)
struct __half;
struct __nv_bfloat16;
namespace c10 {
struct Half;
struct BFloat16;
}  // namespace c10

namespace course {

// The dtype's name as torch spells it (torch.float32 -> "float32").
template <typename T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, double>) return "float64";
  else if constexpr (std::is_same_v<T, c10::Half> || std::is_same_v<T, __half>) return "float16";
  else if constexpr (std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, __nv_bfloat16>) return "bfloat16";
  else static_assert(sizeof(T) == 0, "course::took<T>: no dtype name for this type");
}

struct PathsTaken {
  std::mutex lock;
  std::set<std::string> names;
  std::string text;  // the last course_paths_taken() answer: kept alive for the caller
};

__attribute__((visibility("hidden"))) inline PathsTaken& paths_taken() {
  static PathsTaken* taken = new PathsTaken();  // never destroyed: a launch at exit may still mark
  return *taken;
}

// This branch ran, for no dtype in particular.
__attribute__((visibility("hidden"))) inline void took(const char* name) {
  PathsTaken& p = paths_taken();
  std::lock_guard<std::mutex> hold(p.lock);
  p.names.emplace(name);
}

// This branch ran for scalar type T: recorded as "name/<dtype>".
template <typename T>
__attribute__((visibility("hidden"))) inline void took(const char* name) {
  took((std::string(name) + "/" + dtype_name<T>()).c_str());
}

}  // namespace course
