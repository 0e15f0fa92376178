#include "core/http_date.hpp"

#include <gtest/gtest.h>

namespace idem::core {
namespace {

using namespace std::chrono;

sys_seconds at(year_month_day date, hours h, minutes m, seconds s) { return sys_days{date} + h + m + s; }

TEST(HttpDate, ImfFixdateAsRfc9110ShowsIt) {
  EXPECT_EQ(http_date(at(1994y / November / 6, 8h, 49min, 37s)), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(http_date(system_clock::time_point{}), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(http_date(at(2026y / November / 26, 23h, 59min, 59s)), "Thu, 26 Nov 2026 23:59:59 GMT");
  EXPECT_EQ(http_date(at(2028y / February / 29, 0h, 0min, 1s)), "Tue, 29 Feb 2028 00:00:01 GMT");
}

TEST(HttpDate, FractionsOfASecondAreTruncatedNeverRoundedUp) {
  const auto time = at(2026y / December / 31, 23h, 59min, 59s) + milliseconds(999);
  EXPECT_EQ(http_date(time), "Thu, 31 Dec 2026 23:59:59 GMT");
}

}  // namespace
}  // namespace idem::core
