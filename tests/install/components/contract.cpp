// The installed store contract suite run against MemoryStore, the way the author of a new
// backend runs it against theirs.
#include <memory>

#include "litetx/litetx.h"
#include "litetx/testing/store_contract.h"

using ltxtest::StoreContractTest;

INSTANTIATE_TEST_SUITE_P(
    Installed, StoreContractTest,
    ::testing::Values(ltxtest::StoreFactoryParam{
        "MemoryStore", [] { return std::make_shared<litetx::MemoryStore>(); }}),
    ltxtest::StoreFactoryName);
