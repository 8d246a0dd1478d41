// Shared helpers for the course's binding files (*.cpp): input checks and op registration.
#pragma once

#include <initializer_list>
#include <string>
#include <type_traits>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <course/paths.h>

// The op namespace is chosen per build by the grader (-DCOURSE_NS=...), so a student's build and
// the reference build can be loaded into one process without their ops colliding. The extra
// macro level expands COURSE_NS before TORCH_LIBRARY pastes it into identifiers.
#ifndef COURSE_NS
#define COURSE_NS course
#endif
#define COURSE_LIBRARY_EXPAND(ns, m) TORCH_LIBRARY(ns, m)
#define COURSE_LIBRARY(m) COURSE_LIBRARY_EXPAND(COURSE_NS, m)
#define COURSE_LIBRARY_IMPL_EXPAND(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)
#define COURSE_LIBRARY_IMPL(key, m) COURSE_LIBRARY_IMPL_EXPAND(COURSE_NS, key, m)

namespace course {

// Error messages are built from strings only. On the H100 machine (torch 2.11, nvcc 13) a
// TORCH_CHECK that streamed an integer, a double or an IntArrayRef crashed the process (SIGSEGV) in
// extensions that also have nvcc-compiled files: both compilers instantiate c10::str's templates for
// those argument types. Strings and C strings are safe, so numbers go through course::str first.
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
inline std::string str(T v) { return std::to_string(v); }
inline std::string str(double v) { return std::to_string(v); }

// "[2, 3, 4]"
inline std::string str(at::IntArrayRef v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

inline std::string shape_of(const at::Tensor& t) { return str(t.sizes()); }
inline std::string device_str(const at::Tensor& t) { return t.device().str(); }
inline std::string dtype_str(const at::Tensor& t) { return c10::toString(t.scalar_type()); }

inline void check_cuda(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor, but it is on ", device_str(t));
}

inline void check_contiguous(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous (call .contiguous() first)");
}

inline void check_dim(const at::Tensor& t, int64_t dim, const char* name) {
  TORCH_CHECK(t.dim() == dim, name, " must have ", str(dim), " dimensions, but has shape ", shape_of(t));
}

inline void check_dtype(const at::Tensor& t, std::initializer_list<at::ScalarType> allowed, const char* name) {
  for (auto s : allowed) {
    if (t.scalar_type() == s) return;
  }
  std::string names;
  for (auto s : allowed) names += std::string(names.empty() ? "" : ", ") + c10::toString(s);
  TORCH_CHECK(false, name, " must have dtype in {", names, "}, but has ", dtype_str(t));
}

// `other` must match `ref` in device, dtype and shape (e.g. a gradient and its input).
inline void check_same(const at::Tensor& other, const char* other_name, const at::Tensor& ref, const char* ref_name) {
  TORCH_CHECK(other.device() == ref.device(), other_name, " must be on the same device as ", ref_name,
              " (", device_str(ref), "), but is on ", device_str(other));
  TORCH_CHECK(other.scalar_type() == ref.scalar_type(), other_name, " must have the same dtype as ", ref_name,
              " (", dtype_str(ref), "), but has ", dtype_str(other));
  TORCH_CHECK(other.sizes().equals(ref.sizes()), other_name, " must have the same shape as ", ref_name, " (",
              shape_of(ref), "), but has shape ", shape_of(other));
}

}  // namespace course

// The planner paths this library took (course/paths.h), one "name" or "name/dtype" a line, sorted: read
// by the grader through ctypes (grader/verify/paths.py). Defined in every binding file that includes this
// header (inline: the linker keeps one), exported by its C name from each exercise's library.
extern "C" __attribute__((visibility("default"), used)) inline const char* course_paths_taken() {
  course::PathsTaken& p = course::paths_taken();
  std::lock_guard<std::mutex> hold(p.lock);
  p.text.clear();
  for (const std::string& name : p.names) p.text += name + "\n";
  return p.text.c_str();
}

// A branch of the exercise's Python code taken (grader.toolchain.build.Library.took): into the same set.
extern "C" __attribute__((visibility("default"), used)) inline void course_took(const char* name) {
  course::took(name);
}
