// Shared helpers for the course's binding files (*.cpp): input checks and op registration.
#pragma once

#include <initializer_list>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

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

// "[2, 3, 4]": shapes formatted by hand, so that messages do not depend on operator<< overloads.
inline std::string shape_of(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

inline void check_cuda(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor, but it is on ", t.device());
}

inline void check_contiguous(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous (call .contiguous() first)");
}

inline void check_dim(const at::Tensor& t, int64_t dim, const char* name) {
  TORCH_CHECK(t.dim() == dim, name, " must have ", dim, " dimensions, but has shape ", shape_of(t));
}

inline void check_dtype(const at::Tensor& t, std::initializer_list<at::ScalarType> allowed, const char* name) {
  for (auto s : allowed) {
    if (t.scalar_type() == s) return;
  }
  std::string names;
  for (auto s : allowed) names += std::string(names.empty() ? "" : ", ") + c10::toString(s);
  TORCH_CHECK(false, name, " must have dtype in {", names, "}, but has ", t.scalar_type());
}

// `other` must match `ref` in device, dtype and shape (e.g. a gradient and its input).
inline void check_same(const at::Tensor& other, const char* other_name, const at::Tensor& ref, const char* ref_name) {
  TORCH_CHECK(other.device() == ref.device(), other_name, " must be on the same device as ", ref_name,
              " (", ref.device(), "), but is on ", other.device());
  TORCH_CHECK(other.scalar_type() == ref.scalar_type(), other_name, " must have the same dtype as ", ref_name,
              " (", ref.scalar_type(), "), but has ", other.scalar_type());
  TORCH_CHECK(other.sizes().equals(ref.sizes()), other_name, " must have the same shape as ", ref_name, " (",
              shape_of(ref), "), but has shape ", shape_of(other));
}

}  // namespace course
