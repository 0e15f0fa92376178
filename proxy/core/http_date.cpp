#include "core/http_date.hpp"

#include <array>
#include <cstdio>

namespace idem::core {

std::string http_date(std::chrono::system_clock::time_point time) {
  using namespace std::chrono;
  static constexpr std::array<const char*, 7> kWeekdays = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr std::array<const char*, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto seconds = floor<std::chrono::seconds>(time);
  const auto day = floor<days>(seconds);
  const year_month_day date{day};
  const hh_mm_ss clock{seconds - day};
  std::array<char, 32> text{};
  const int length = std::snprintf(text.data(), text.size(), "%s, %02u %s %04d %02d:%02d:%02d GMT",
                                   kWeekdays[weekday{day}.c_encoding()], static_cast<unsigned>(date.day()),
                                   kMonths[static_cast<unsigned>(date.month()) - 1], static_cast<int>(date.year()),
                                   static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
                                   static_cast<int>(clock.seconds().count()));
  return std::string(text.data(), static_cast<std::size_t>(length));
}

}  // namespace idem::core
