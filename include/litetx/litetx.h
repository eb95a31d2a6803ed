// litetx/litetx.h — the whole public API in one include.
#pragma once

#include "litetx/clock.h"
#include "litetx/counting_store.h"
#include "litetx/database.h"
#include "litetx/document.h"
#include "litetx/forwarding_store.h"
#include "litetx/memory_store.h"
#include "litetx/collector.h"
#include "litetx/fault_injecting_store.h"
#include "litetx/lmdb_store.h"
#include "litetx/options.h"
#include "litetx/run.h"
#include "litetx/status.h"
#include "litetx/store.h"
#include "litetx/transaction.h"
