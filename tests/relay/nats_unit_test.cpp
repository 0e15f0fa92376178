// The NATS sink's pure parts: subject coverage, the message id and when an earlier version's copy
// may still be deduplicable, and what a stream's duplicate window covers. No sockets.
#include <gtest/gtest.h>

#include <regex>

#include "relay/event_fingerprint.hpp"
#include "relay/nats_duplicate_window.hpp"
#include "relay/nats_message_id.hpp"
#include "relay/nats_subjects.hpp"

namespace idem::relay {
namespace {

using namespace std::chrono_literals;

TEST(NatsSubjects, MatchLikeTheServer) {
  EXPECT_TRUE(subject_matches("outbox.order", "outbox.order"));
  EXPECT_FALSE(subject_matches("outbox.order", "outbox.orders"));
  EXPECT_TRUE(subject_matches("outbox.*", "outbox.order"));
  EXPECT_FALSE(subject_matches("outbox.*", "outbox.billing.invoice")) << "* is one token";
  EXPECT_FALSE(subject_matches("outbox.*", "outbox")) << "* needs a token";
  EXPECT_TRUE(subject_matches("outbox.>", "outbox.billing.invoice"));
  EXPECT_TRUE(subject_matches("outbox.>", "outbox.order"));
  EXPECT_FALSE(subject_matches("outbox.>", "outbox")) << "> needs at least one token";
  EXPECT_TRUE(subject_matches(">", "anything.at.all"));
  EXPECT_TRUE(subject_matches("*.order.*", "outbox.order.created"));
  EXPECT_FALSE(subject_matches("*.order.*", "outbox.order"));
  EXPECT_FALSE(subject_matches("outbox.order", "outbox.order.created")) << "no tokens left over";
  EXPECT_FALSE(subject_matches("outbox.*", "outbox.")) << "an empty token is no subject";
  EXPECT_FALSE(subject_matches("", "outbox"));
}

TEST(NatsSubjects, StreamCoversWhenAnyFilterMatches) {
  const std::vector<std::string> filters = {"outbox.*", "audit.>"};
  EXPECT_TRUE(stream_covers(filters, "outbox.order"));
  EXPECT_TRUE(stream_covers(filters, "audit.billing.invoice"));
  EXPECT_FALSE(stream_covers(filters, "outbox.billing.invoice"));
  EXPECT_FALSE(stream_covers({}, "outbox.order"));
  EXPECT_EQ(describe_filters(filters), "outbox.*, audit.>");
}

OutboxRow row(std::int64_t id, std::int64_t created_at_micros, std::string payload = R"({"n": 1})") {
  return OutboxRow{.id = id,
                   .aggregate_type = "order",
                   .aggregate_id = "42",
                   .event_type = "order.paid",
                   .payload = std::move(payload),
                   .headers = "{}",
                   .created_at = "2026-01-02T03:04:05.000001Z",
                   .created_at_micros = created_at_micros,
                   .attempts = 0,
                   .traceparent = {},
                   .tracestate = {}};
}

TEST(NatsMessageId, NamesTheEventNotItsRow) {
  const OutboxRow first = row(7, 1'000'000);
  EXPECT_EQ(nats_message_id(first), "7:" + event_fingerprint(first));
  EXPECT_TRUE(std::regex_match(nats_message_id(first), std::regex("7:[0-9a-f]{64}")));
  EXPECT_EQ(nats_message_id(first), nats_message_id(row(7, 1'000'000))) << "stable across re-publishes";
  EXPECT_NE(nats_message_id(first), nats_message_id(row(7, 2'000'000))) << "id reused later: another event";
  EXPECT_NE(nats_message_id(first), nats_message_id(row(7, 1'000'000, R"({"n": 2})"))) << "same id, other content";
  EXPECT_EQ(legacy_nats_message_id(first), "7");
}

TEST(NatsMessageId, AnEarlierVersionsCopyIsLookedForOnlyWhileItCanStillBeInTheWindow) {
  const std::int64_t started = 1'700'000'000'000'000;
  const std::int64_t second = 1'000'000;
  const auto window = 2min;
  // Created before this process started, within its first window: probed.
  EXPECT_TRUE(may_have_legacy_copy(started - 3600 * second, started, started + 10 * second, window));
  // A window after the start, any copy an earlier version stored has been forgotten.
  EXPECT_FALSE(may_have_legacy_copy(started - 3600 * second, started, started + 120 * second, window));
  // Created after the start (beyond the clock-skew allowance, 500 ms): no earlier version saw it.
  EXPECT_FALSE(may_have_legacy_copy(started + second, started, started + 2 * second, 1h));
  EXPECT_TRUE(may_have_legacy_copy(started + second / 4, started, started + second, 1h))
      << "the database's clock may run a little ahead";
}

TEST(NatsMessageId, NothingIsProbedWhenTheStreamStoredNothingWithinAWindowBeforeTheStart) {
  const std::int64_t started = 1'700'000'000'000'000;
  const std::int64_t second = 1'000'000;
  EXPECT_FALSE(earlier_copies_possible(0, started, 1h)) << "an empty stream";
  EXPECT_FALSE(earlier_copies_possible(started - 3601 * second, started, 1h)) << "quiet for longer than the window";
  EXPECT_TRUE(earlier_copies_possible(started - 3599 * second, started, 1h));
  EXPECT_TRUE(earlier_copies_possible(started - second, started, 1h));
}

TEST(NatsDuplicateWindow, ShorterThanLeasePlusBackoffIsRefused) {
  const DuplicateWindowCheck check = check_duplicate_window("OUTBOX", 2s, 3200ms);
  EXPECT_EQ(check.verdict, DuplicateWindowVerdict::refused);
  EXPECT_EQ(check.message,
            "stream \"OUTBOX\" deduplicates over 2000 ms (duplicate_window), shorter than relay.lease + "
            "relay.backoff.max (3200 ms): a row published again after that long would be stored twice");
}

TEST(NatsDuplicateWindow, ShortOfAnHourIsWarnedAboutWithTheOutageItCovers) {
  const DuplicateWindowCheck check = check_duplicate_window("OUTBOX", 330s, 330s);
  EXPECT_EQ(check.verdict, DuplicateWindowVerdict::warned);
  EXPECT_NE(check.message.find("stream \"OUTBOX\" deduplicates over 5m 30s (duplicate_window): a relay stopped, or "
                               "Postgres unreachable, for longer than 5m 30s between publishing an event and "
                               "marking it stores the event twice"),
            std::string::npos)
      << check.message;
  EXPECT_NE(check.message.find("(at least 1h)"), std::string::npos) << check.message;
}

TEST(NatsDuplicateWindow, HoursAreEnough) {
  const DuplicateWindowCheck check = check_duplicate_window("OUTBOX", 2h, 330s);
  EXPECT_EQ(check.verdict, DuplicateWindowVerdict::enough);
  EXPECT_EQ(check.message,
            "stream \"OUTBOX\" deduplicates over 2h: covers an outage of up to that long between a publish and its "
            "mark");
  EXPECT_EQ(check_duplicate_window("OUTBOX", 1h, 330s).verdict, DuplicateWindowVerdict::enough);
}

TEST(NatsDuplicateWindow, DurationsReadAsWritten) {
  EXPECT_EQ(describe_duration(4s), "4s");
  EXPECT_EQ(describe_duration(2min), "2m");
  EXPECT_EQ(describe_duration(2h + 30min), "2h 30m");
  EXPECT_EQ(describe_duration(1500ms), "1500ms");
  EXPECT_EQ(describe_duration(0ms), "0ms");
}

}  // namespace
}  // namespace idem::relay
