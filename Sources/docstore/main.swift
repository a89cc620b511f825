import ArgumentParser
import NIOCore
import NIOPosix

// `docstore serve` runs Swift concurrency's tasks on the server's event loops (NIO's singleton
// group, which Hummingbird serves on): a request's task then starts and ends on the thread that
// read it, instead of waking a thread of the global pool and back for every request. Nothing in
// DocStore blocks a task (SQLite, JavaScript and file I/O run on dedicated threads, DESIGN.md §6),
// so the event loops stay free. It must happen before the first task is made: here, first thing.
if CommandLine.arguments.dropFirst().first == "serve" {
    NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
}

/// The command line's command. A function, because top-level code prefers the synchronous
/// `ParsableCommand.main()`, which would not run an async command.
func runCommand() async {
    await DocStoreCommand.main()
}

await runCommand()
