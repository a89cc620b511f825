import ArgumentParser
import DocStore
import DocSync
import Foundation

/// The `docstore` command-line tool.
@main
struct DocStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docstore",
        abstract: "A document database with CouchDB-compatible revisions, on SQLite.",
        discussion: """
            Commands operate on a local database given with --db PATH: the database NAME in folder DIR \
            for PATH = DIR/NAME (its file is DIR/NAME.sqlite). The default is ./docstore-data/default. \
            --db http://user:password@host:5984/db names a database of a CouchDB-compatible server \
            (Apache CouchDB, docstore serve) instead: the commands ask it over HTTP and print its answers.
            """,
        subcommands: [Put.self, Get.self, Delete.self, All.self, Changes.self, Query.self, Find.self, Index.self, Search.self, Info.self,
                      Import.self, Export.self, Compact.self, Serve.self, User.self, Replicate.self]
    )
}

/// The `--db` option shared by the commands.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The database: DIR/NAME stores NAME.sqlite in DIR; or a server's http://user:password@host:port/NAME.",
                                            valueName: "path"))
    var db: String = "./docstore-data/default"

    /// The server's database, when `--db` is an `http` or `https` URL.
    var remote: RemoteAddress? { RemoteAddress(db) }

    /// The folder and name `--db` designates.
    var location: (directory: URL, name: String) {
        var url = URL(fileURLWithPath: db)
        if url.pathExtension == "sqlite" { url.deletePathExtension() }
        return (url.deletingLastPathComponent(), url.lastPathComponent)
    }

    func open() async throws -> Database {
        let (directory, name) = location
        return try await Database.open(name: name, directory: directory)
    }
}

/// Runs a command body with a database, closing it afterwards and turning errors into one clear line
/// on standard error and a non-zero exit code.
func withDatabase(_ options: DatabaseOptions, _ body: (Database) async throws -> Void) async throws {
    try await reportingErrors {
        let database = try await options.open()
        do {
            try await body(database)
        } catch {
            await database.close()
            throw error
        }
        await database.close()
    }
}

/// Runs a command body, turning its errors — a database's, a server's answer, any other — into one
/// clear line on standard error and exit status 1; an `ExitCode` passes through.
func reportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as RemoteError {
        fail("\(error.error): \(error.reason)")
    } catch let error as DocStoreError {
        fail("\(error.couchDBError): \(error.reason)")
    } catch let error as ReplicationError {
        fail("\(error.couchDBError): \(error.reason)")
    } catch let error as ExitCode {
        throw error
    } catch {
        fail("\(error)")
    }
}

/// Prints `message` to standard error as one line and exits with status 1.
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("docstore: error: \(message)\n".utf8))
    exit(1)
}

/// Prints one JSON value as a line on standard output.
func printJSON(_ value: JSON) {
    print(value.description)
}

/// Parses a JSON option value, failing with a clear message.
func parseJSONArgument(_ text: String, name: String) -> JSON {
    do {
        return try JSON(parsing: text)
    } catch let error as DocStoreError {
        fail("bad_request: \(name) is not valid JSON: \(error.reason)")
    } catch {
        fail("bad_request: \(name) is not valid JSON")
    }
}

/// Reads all of standard input as text.
func readStandardInput() -> Data {
    FileHandle.standardInput.readDataToEndOfFile()
}

/// Parses a `--rev` value, failing with a clear message.
func parseRevision(_ text: String) -> RevisionID {
    guard let revision = RevisionID(text) else { fail("bad_request: Invalid rev format \"\(text)\"") }
    return revision
}
