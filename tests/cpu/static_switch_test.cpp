// kernels/common/static_switch.hpp: run-time values to template arguments, and the error that
// names a value no kernel was compiled for (host-only code: no GPU needed).
#include <stdexcept>
#include <string>
#include <type_traits>

#include <gtest/gtest.h>

#include "common/static_switch.hpp"

namespace attnprof::kernels {
namespace {

template <DType kDType, int kHeadDim, bool kFlag>
std::string instance_name() {
  return std::string(to_string(kDType)) + "/" + std::to_string(kHeadDim) + (kFlag ? "/on" : "/off");
}

std::string pick(DType dtype, int head_dim, bool flag) {
  return dtype_switch<DType::bf16, DType::fp16>("family", dtype, [&](auto d) {
    return head_dim_switch<64, 128, 256>("family", head_dim, [&](auto h) {
      return bool_switch(flag, [&](auto f) {
        return instance_name<decltype(d)::value, decltype(h)::value, decltype(f)::value>();
      });
    });
  });
}

TEST(StaticSwitch, EveryCompiledCombinationIsReached) {
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int head_dim : {64, 128, 256})
      for (bool flag : {false, true})
        EXPECT_EQ(pick(dtype, head_dim, flag),
                  std::string(to_string(dtype)) + "/" + std::to_string(head_dim) + (flag ? "/on" : "/off"));
}

TEST(StaticSwitch, TagsAreCompileTimeConstants) {
  head_dim_switch<64>("family", 64, [](auto h) {
    static_assert(std::is_same_v<decltype(h), std::integral_constant<int, 64>>);
    return 0;
  });
  bool_switch(true, [](auto f) {
    static_assert(decltype(f)::value || !decltype(f)::value);
  });
}

TEST(StaticSwitch, AValueWithNoKernelIsNamedWithWhatExists) {
  try {
    pick(DType::fp32, 64, false);
    FAIL() << "fp32 has no kernel";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "family: no kernel for dtype fp32 (compiled: bf16 fp16)");
  }
  try {
    pick(DType::bf16, 96, true);
    FAIL() << "head_dim 96 has no kernel";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "family: no kernel for head_dim 96 (compiled: 64 128 256)");
  }
}

}  // namespace
}  // namespace attnprof::kernels
