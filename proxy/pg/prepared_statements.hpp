#pragma once
// The named prepared statements of one server session: which of our statements it has parsed and
// planned already, under which name. Owned by a Connection, so a new connection (a reconnect)
// starts with none.
//
// A statement is identified by the address of its SQL text (a constant with static storage
// duration, see Statement::sql) and its parameter type OIDs: the same text prepared with other
// types is another statement. Its server-side name is derived from the text and the types alone
// ("idem_" + 16 hex digits of a 64-bit FNV-1a hash), never from the order of first use, so two
// sessions that both hold a name hold the same statement. That makes "already exists" (42P05) on
// a prepare safe to read as "prepared", whoever prepared it.
#include <libpq-fe.h>

#include <span>
#include <string>
#include <vector>

namespace idem::pg {

class PreparedStatements {
 public:
  struct Entry {
    const char* sql = nullptr;
    std::vector<Oid> types;
    std::string name;       // NUL-terminated for libpq
    bool prepared = false;  // the session holds it
  };

  // The entry of (sql, types), created unprepared on first sight. Entries are never removed, and
  // a reference stays valid until the next find_or_add().
  Entry& find_or_add(const char* sql, std::span<const Oid> types);
  std::size_t prepared_count() const;  // entries the session holds

 private:
  std::vector<Entry> entries_;  // a handful: linear search beats hashing the key
};

// The session-wide name of the statement with this text and these parameter types.
std::string prepared_statement_name(const char* sql, std::span<const Oid> types);

}  // namespace idem::pg
