import ArgumentParser
import DocServer
import DocStore
import Foundation
import Logging
import NIOCore

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the databases of a folder over the CouchDB HTTP API.",
        discussion: """
            Every NAME.sqlite in --data is database NAME. The folder is created on first run. Requests need \
            credentials: the administrator (--admin NAME:PASSWORD or DOCSTORE_ADMIN) or a user made with \
            `docstore user add`. Stops cleanly on Ctrl-C (SIGINT) or SIGTERM.
            """)

    @Option(help: "The data folder.")
    var data: String = "./docstore-data"

    @Option(help: "The address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "The port (0 picks a free one).")
    var port: Int = 5984

    @Option(help: ArgumentHelp("The administrator, as NAME:PASSWORD.", valueName: "name:password"))
    var admin: String?

    @Flag(name: .customLong("allow-anonymous"), help: "Serve requests without credentials, with administrator rights.")
    var allowAnonymous = false

    @Option(name: .customLong("max-body-mb"), help: "The largest JSON request body, in MB.")
    var maxBodyMegabytes: Int = 64

    @Option(name: .customLong("max-attachment-mb"),
            help: "The largest attachment, in MB (streamed to and from the database, never held whole).")
    var maxAttachmentMegabytes: Int = 1024

    @Option(name: .customLong("cors-origin"),
            help: ArgumentHelp("Let web pages of this origin (https://app.example:8443, or * for any) call the server from a browser; repeatable. Pages of listed origins may send credentials (cookies, Authorization), as PouchDB does.",
                               valueName: "origin"))
    var corsOrigins: [String] = []

    @Flag(name: .customLong("no-cors-credentials"),
          help: "Do not let the pages of --cors-origin send credentials (CouchDB's [cors] credentials = false).")
    var noCORSCredentials = false

    @Flag(name: .customLong("no-javascript"),
          help: "Do not run design documents' JavaScript (views, filters, validate_doc_update, shows, lists, updates).")
    var noJavaScript = false

    @Option(name: .customLong("javascript-timeout"),
            help: ArgumentHelp("Seconds one call of a design document's function may run before it is stopped (CouchDB's os_process_timeout).",
                               valueName: "seconds"))
    var javaScriptTimeout: Double = 5

    @Option(name: .customLong("javascript-memory"),
            help: ArgumentHelp("Megabytes one call of a design document's function may grow the server's memory by before it is stopped; 0 for no bound.",
                               valueName: "MB"))
    var javaScriptMemory = 256

    @Option(name: .customLong("lock-timeout"),
            help: ArgumentHelp("Seconds a write waits for a database file's write lock that another process holds before it answers 503.",
                               valueName: "seconds"))
    var lockTimeout: Double = 10

    @Option(name: .customLong("channels-field"),
            help: ArgumentHelp("The document field that names its channels (a string or an array of strings).", valueName: "field"))
    var channelsField = "channels"

    @Flag(name: .customLong("no-utils"), help: "Do not serve the web administration page at /_utils/.")
    var noUtils = false

    @Option(name: .customLong("log-level"),
            help: ArgumentHelp("What is logged to standard error: trace, debug, info (one line per request), notice, warning, error or critical. Default: DOCSTORE_LOG_LEVEL, else info.",
                               valueName: "level"))
    var logLevel: String?

    func validate() throws {
        guard javaScriptTimeout > 0, javaScriptTimeout <= 3600 else {
            throw ValidationError("--javascript-timeout must be a number of seconds above 0, at most 3600")
        }
        guard javaScriptMemory >= 0 else { throw ValidationError("--javascript-memory must be a number of megabytes, 0 for no bound") }
        guard lockTimeout >= 0, lockTimeout <= 3600 else {
            throw ValidationError("--lock-timeout must be a number of seconds from 0 to 3600")
        }
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    func run() async throws {
        // A server runs for days: large transient buffers out of malloc's arenas, SQLite's settings
        // made before any connection opens.
        Database.prepareProcessForService()
        let environment = ProcessInfo.processInfo.environment["DOCSTORE_LOG_LEVEL"]
        let level = (logLevel ?? environment).flatMap(Logger.Level.init(rawValue:)) ?? .info
        if logLevel == nil, let environment, Logger.Level(rawValue: environment) == nil {
            FileHandle.standardError.write(Data("docstore: note: DOCSTORE_LOG_LEVEL=\(environment) is not a log level; logging at info\n".utf8))
        }
        LoggingSystem.bootstrap { label in
            var handler = StderrLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
        var configuration = ServerConfiguration(dataDirectory: URL(fileURLWithPath: data))
        configuration.host = host
        configuration.port = port
        configuration.allowAnonymous = allowAnonymous
        configuration.javaScript = !noJavaScript
        configuration.utilsPage = !noUtils
        configuration.channelsField = channelsField
        configuration.javaScriptTimeLimit = .milliseconds(Int(javaScriptTimeout * 1000))
        configuration.javaScriptMemoryLimit = javaScriptMemory == 0 ? nil : javaScriptMemory * 1024 * 1024
        configuration.lockTimeout = .milliseconds(Int(lockTimeout * 1000))
        configuration.maximumBodySize = maxBodyMegabytes * 1024 * 1024
        configuration.maximumAttachmentSize = maxAttachmentMegabytes * 1024 * 1024
        if !corsOrigins.isEmpty { configuration.cors = CORSConfiguration(origins: corsOrigins, credentials: !noCORSCredentials) }
        if let admin {
            guard let colon = admin.firstIndex(of: ":"), colon != admin.startIndex else {
                fail("bad_request: --admin must be NAME:PASSWORD")
            }
            configuration.admin = (String(admin[..<colon]), String(admin[admin.index(after: colon)...]))
        }
        if configuration.admin == nil && !allowAnonymous {
            FileHandle.standardError.write(Data(Serve.noAdministratorNote(data: data).utf8))
        }
        let server: DocServer
        do {
            server = try await DocServer(configuration: configuration)
        } catch {
            fail("cannot start: \(error)")
        }
        let host = self.host
        let folder = configuration.dataDirectory.path
        let utils = configuration.utilsPage
        do {
            try await server.run { port in
                var lines = "DocStore is serving \(folder) at http://\(host):\(port)/\n"
                if utils { lines += "Web administration: http://\(host):\(port)/_utils/\n" }
                FileHandle.standardOutput.write(Data(lines.utf8))
            }
        } catch where Serve.isAddressInUse(error) {
            fail(Serve.addressInUse(host: host, port: port))
        } catch {
            fail("server stopped: \(error)")
        }
        print("DocStore stopped; databases closed.")
    }

    /// What `serve` says when it starts with no administrator: who can then sign in, and the two ways
    /// to have someone who can.
    static func noAdministratorNote(data: String) -> String {
        """
        docstore: note: no administrator, so nobody can create databases or users over HTTP; only users \
        already in \(data)/_users.sqlite can sign in. Either start with an administrator:
            docstore serve --admin NAME:PASSWORD        (or DOCSTORE_ADMIN=NAME:PASSWORD docstore serve)
          or add a user to this data folder, then restart:
            docstore user add NAME --password PASSWORD --data \(data)

        """
    }

    /// Whether `error` says the address to listen on is taken (`EADDRINUSE` from `bind`).
    static func isAddressInUse(_ error: any Error) -> Bool {
        if let error = error as? IOError { return error.errnoCode == EADDRINUSE }
        return "\(error)".contains("Address already in use")
    }

    /// The answer to a port another process holds: which port, and how to choose another.
    static func addressInUse(host: String, port: Int) -> String {
        "port \(port) on \(host) is already in use (another server, CouchDB perhaps, listens there): "
            + "start with --port \(port == 5984 ? 5985 : port + 1), or --port 0 for any free port"
    }
}

struct User: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the users of a data folder served by `docstore serve`.",
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a user, or replace its password, roles and channels.",
            discussion: """
                Users are documents of the _users database (org.couchdb.user:NAME), as in CouchDB. A user \
                given no channels reads and writes every document of the databases its roles and name \
                admit (their _security objects); one given channels only documents in them.
                """)

        @Option(help: "The data folder.")
        var data: String = "./docstore-data"

        @Argument(help: "The user name.")
        var name: String

        @Option(help: "The password (read from standard input when omitted).")
        var password: String?

        @Option(help: "Comma-separated CouchDB roles, matched by databases' _security objects.")
        var roles: String?

        @Option(help: "Comma-separated channels the user may read and write; * for all.")
        var channels: String?

        @Option(name: .customLong("read"), help: "Comma-separated channels the user may read.")
        var readChannels: String?

        @Option(name: .customLong("write"), help: "Comma-separated channels the user may write.")
        var writeChannels: String?

        func run() async throws {
            let password = self.password ?? readLine(strippingNewline: true) ?? ""
            func list(_ text: String?) -> [String] { (text ?? "").split(separator: ",").map(String.init) }
            let restricted = channels != nil || readChannels != nil || writeChannels != nil
            let store = try await UserStore(dataDirectory: URL(fileURLWithPath: data))
            do {
                try await store.setUser(name: name, password: password, roles: list(roles),
                                        readChannels: restricted ? list(channels) + list(readChannels) : nil,
                                        writeChannels: restricted ? list(channels) + list(writeChannels) : nil)
            } catch let error as CouchError {
                await store.close()
                fail("\(error.error): \(error.reason)")
            }
            await store.close()
            print(#"{"ok":true,"name":"\#(name)"}"#)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List users with their roles and channels.")

        @Option(help: "The data folder.")
        var data: String = "./docstore-data"

        func run() async throws {
            let store = try await UserStore(dataDirectory: URL(fileURLWithPath: data))
            for user in try await store.users() {
                print(JSON.object(["name": .string(user.name), "roles": JSON(user.roles), "read_channels": JSON(user.readChannels),
                                   "write_channels": JSON(user.writeChannels)]).description)
            }
            await store.close()
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a user.")

        @Option(help: "The data folder.")
        var data: String = "./docstore-data"

        @Argument(help: "The user name.")
        var name: String

        func run() async throws {
            let store = try await UserStore(dataDirectory: URL(fileURLWithPath: data))
            let removed = try await store.removeUser(name: name)
            await store.close()
            guard removed else { fail("not_found: no user named \(name)") }
            print(#"{"ok":true}"#)
        }
    }
}
