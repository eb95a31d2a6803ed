// tests/docs/guide_store_contract_test.cpp — the Store contract suite (tests/store_contract.h)
// run on the custom store that docs/guide.md builds (examples/guide_store.h).
#include <memory>

#include "examples/guide_store.h"
#include "store_contract.h"

namespace ltxtest {
namespace {

// [guide] contract
INSTANTIATE_TEST_SUITE_P(
    MapStore, StoreContractTest,
    ::testing::Values(StoreFactoryParam{"MapStore",
                                        [] { return std::make_shared<guide::MapStore>(); }}),
    StoreFactoryName);
// [/guide]

}  // namespace
}  // namespace ltxtest
