// The LibTorch headers nearly every runtime translation unit includes,
// precompiled once per target (CMake option REMAT_PCH): parsing them is
// ~85% of such a unit's compile time (a 30 s compile takes 13 s with it).
#ifndef REMAT_RUNTIME_SRC_TORCH_PCH_H_
#define REMAT_RUNTIME_SRC_TORCH_PCH_H_

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#endif  // REMAT_RUNTIME_SRC_TORCH_PCH_H_
