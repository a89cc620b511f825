extension Database {
    /// Prepares this process for a long-running service that uses DocStore, as `docstore serve` does at
    /// start. Call it once, early in `main`, before anything opens a database or uses SQLite.
    ///
    /// - On Linux, glibc's malloc keeps serving large blocks (128 KiB and up) from mappings of their
    ///   own, so the transient buffers of bulk writes, index builds and replications go back to the
    ///   system instead of staying in its arenas, fragmented. The operator's choice wins: nothing
    ///   changes when `MALLOC_MMAP_THRESHOLD_` or `glibc.malloc.mmap_threshold` in `GLIBC_TUNABLES` is
    ///   set, nor where the allocator is not glibc's.
    /// - SQLite's memory statistics are turned off: their upkeep takes one process-wide mutex on every
    ///   SQLite allocation, which DocStore's writer, readers and long reads would contend for. DocStore
    ///   turns them off before it opens its first connection anyway; call this first when the process
    ///   uses SQLite itself before that (another library, files of its own).
    public static func prepareProcessForService() {
        MemoryAllocator.fixLargeBlockThreshold()
        SQLiteSettings.apply()
    }
}
