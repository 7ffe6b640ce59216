// For the API tests: the status of a C ABI call and its error's message, the error freed. Takes &err, read only
// here, after the call: outcome(specula_x(..., &err), &err) (passing err by value could read it before specula_x
// has set it).
#pragma once

#include <specula/specula.h>

#include <catch2/catch.hpp>

#include <string>

namespace test_fixtures {

struct Outcome {
    specula_status status;
    std::string message;
};

inline Outcome outcome(specula_status status, specula_error **err) {
    Outcome o{status, specula_error_message(*err)};
    CHECK((status == SPECULA_OK) == (*err == nullptr));
    specula_error_destroy(*err);
    *err = nullptr;
    return o;
}

}  // namespace test_fixtures
