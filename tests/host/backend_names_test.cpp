// The backend names of the registry (lib/backends/registry.cpp) without a GPU: what a config may
// name, and what a family expands to. The CPU tests and the fuzz targets, which cannot link the
// registry, copy accepted_backend_names(); this is the list they copy.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "core/errors.hpp"

namespace attnprof {
namespace {

using Names = std::vector<std::string>;

TEST(BackendNames, EveryFamilyAndVariantInRegistryOrder) {
  EXPECT_EQ(accepted_backend_names(), (Names{"math", "manual", "manual:out_of_place", "manual:in_place", "efficient",
                                             "flash", "flash:fa2", "flash:hopper", "cudnn"}));
}

TEST(BackendNames, FlashRunsBothVariants) {
  EXPECT_EQ(expand_backend_names({"flash"}), (Names{"flash:fa2", "flash:hopper"}));
  EXPECT_EQ(expand_backend_names({"flash:hopper"}), Names{"flash:hopper"});
  // A variant named beside its family runs once, where the first name puts it.
  EXPECT_EQ(expand_backend_names({"flash:hopper", "cudnn", "flash"}), (Names{"flash:hopper", "cudnn", "flash:fa2"}));
}

TEST(BackendNames, NoVariantIsCalledFlashAlone) {
  // "flash" is a family now: a lookup by that name finds no backend to make.
  EXPECT_EQ(find_backend("flash"), nullptr);
  ASSERT_NE(find_backend("flash:fa2"), nullptr);
  ASSERT_NE(find_backend("flash:hopper"), nullptr);
}

TEST(BackendNames, AMisspeltVariantIsAUsageErrorWithAHint) {
  try {
    expand_backend_names({"flash:hoper"});
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown backend 'flash:hoper' (did you mean 'flash:hopper'?)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace attnprof
