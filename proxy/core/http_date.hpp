#pragma once
// HTTP-date (RFC 9110 §5.6.7, the IMF-fixdate form): "Sun, 06 Nov 1994 08:49:37 GMT".
#include <chrono>
#include <string>

namespace idem::core {

// The time in IMF-fixdate, truncated to the second (so never later than `time`).
std::string http_date(std::chrono::system_clock::time_point time);

}  // namespace idem::core
