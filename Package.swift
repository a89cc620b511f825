// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "DocStore",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "DocStore", targets: ["DocStore"]),
        .library(name: "DocServer", targets: ["DocServer"]),
        .library(name: "DocSync", targets: ["DocSync"]),
        .library(name: "DocStoreJavaScript", targets: ["DocStoreJavaScript"]),
        .executable(name: "docstore", targets: ["docstore"]),
        .executable(name: "docstore-bench", targets: ["DocStoreBenchmarks"]),
        .executable(name: "docstore-fuzz", targets: ["docstore-fuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.70.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.24.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .systemLibrary(
            name: "CJavaScriptCore",
            pkgConfig: "javascriptcoregtk-4.1",
            providers: [.apt(["libjavascriptcoregtk-4.1-dev"])]
        ),
        .target(
            name: "CICUCollation",
            linkerSettings: [
                .linkedLibrary("icui18n", .when(platforms: [.linux])),
                .linkedLibrary("icuuc", .when(platforms: [.linux])),
                .linkedLibrary("icucore", .when(platforms: [.macOS, .iOS])),
            ]
        ),
        .target(
            name: "DocStore",
            dependencies: [
                "CSQLite",
                "CICUCollation",
                "CZlib",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ]
        ),
        .target(
            name: "DocStoreJavaScript",
            dependencies: [
                "DocStore",
                "CJavaScriptCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            linkerSettings: [.linkedFramework("JavaScriptCore", .when(platforms: [.macOS, .iOS]))]
        ),
        .target(
            name: "CouchProtocol",
            dependencies: ["DocStore"]
        ),
        .target(
            name: "DocServer",
            dependencies: [
                "DocStore",
                "DocStoreJavaScript",
                "DocSync",
                "CouchProtocol",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            // The web administration page at /_utils/ (UtilsRoutes.swift), compiled into the library.
            resources: [
                .embedInCode("Utils/index.html"),
                .embedInCode("Utils/utils.css"),
                .embedInCode("Utils/utils.js"),
                .embedInCode("Utils/icon.svg"),
            ]
        ),
        .target(
            name: "DocSync",
            dependencies: [
                "DocStore",
                "CouchProtocol",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "docstore",
            dependencies: [
                "DocStore",
                "CouchProtocol",
                "DocServer",
                "DocSync",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The fuzz targets' properties, and the executable libFuzzer drives (Tests/Fuzz/run.sh).
        .target(
            name: "DocStoreFuzzing",
            dependencies: [
                "DocStore",
                "DocServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "docstore-fuzz",
            dependencies: ["DocStoreFuzzing"]
        ),
        .executableTarget(
            name: "DocStoreBenchmarks",
            dependencies: [
                "DocStore",
                "DocStoreJavaScript",
                "DocSync",
                "DocServer",
                "CSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "TestSupport",
            dependencies: ["DocStore", .product(name: "Logging", package: "swift-log")],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "DocStoreTests",
            dependencies: ["DocStore", "CouchProtocol", "DocStoreFuzzing", "TestSupport"]
        ),
        .testTarget(
            name: "DocStoreJavaScriptTests",
            dependencies: ["DocStore", "DocStoreJavaScript", "TestSupport"]
        ),
        .testTarget(
            name: "DocServerTests",
            dependencies: ["DocStore", "DocServer", "TestSupport",
                           .product(name: "Crypto", package: "swift-crypto"), .product(name: "CryptoExtras", package: "swift-crypto"),
                           .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")]
        ),
        .testTarget(
            name: "DocSyncTests",
            dependencies: ["DocStore", "CouchProtocol", "DocServer", "DocSync", "DocStoreJavaScript", "TestSupport",
                           .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "CouchProtocolTests",
            dependencies: ["DocStore", "CouchProtocol", "TestSupport"]
        ),
        .testTarget(
            name: "DocStoreCLITests",
            dependencies: ["DocStore", "DocSync", "docstore", "TestSupport"]
        ),
    ]
)
