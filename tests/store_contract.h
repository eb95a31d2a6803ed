// tests/store_contract.h — the Store contract of include/litetx/store.h as a reusable,
// value-parameterised GoogleTest suite.
//
// The tests themselves are defined once, in store_contract.cpp. A backend joins the suite by
// instantiating it with a factory that returns a fresh, empty store:
//
//   INSTANTIATE_TEST_SUITE_P(Lmdb, StoreContractTest,
//       ::testing::Values(ltxtest::StoreFactoryParam{"Lmdb", [] { return MakeLmdb(); }}),
//       ltxtest::StoreFactoryName);
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "litetx/store.h"

namespace ltxtest {

using StoreFactory = std::function<std::shared_ptr<litetx::Store>()>;

struct StoreFactoryParam {
  std::string name;  // a valid GoogleTest name: letters, digits, underscores
  StoreFactory make;
};

inline std::string StoreFactoryName(const ::testing::TestParamInfo<StoreFactoryParam>& info) {
  return info.param.name;
}

inline void PrintTo(const StoreFactoryParam& p, std::ostream* os) { *os << p.name; }

class StoreContractTest : public ::testing::TestWithParam<StoreFactoryParam> {
 protected:
  void SetUp() override {
    store_ = GetParam().make();
    ASSERT_NE(store_, nullptr);
  }
  litetx::Store& store() { return *store_; }
  std::shared_ptr<litetx::Store> store_;
};

}  // namespace ltxtest
