#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
#include <sqlite3.h>

/// Turns off SQLite's memory statistics, whose upkeep takes a process-wide mutex on every
/// allocation that threads using different connections then contend for. `sqlite3_config` is
/// variadic, which Swift cannot call; this wraps the one call DocStore needs. It only takes effect
/// before SQLite initializes (SQLITE_MISUSE otherwise, which changes nothing).
static inline int csqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
#endif
