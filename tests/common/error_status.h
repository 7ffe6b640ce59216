// For the unit tests (which see the core's internal types): the status of the specula::internal::Error a call
// throws, or SPECULA_OK when it throws none.
#pragma once

#include "core/error.h"

namespace test_fixtures {

template <class F> specula_status error_status(F &&fn) {
    try {
        fn();
    } catch (const specula::internal::Error &e) {
        return e.status();
    }
    return SPECULA_OK;
}

}  // namespace test_fixtures
