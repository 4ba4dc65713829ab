// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "ibeacon",
    products: [
        .executable(name: "ibeacon", targets: ["ibeacon"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // Pure: bytes, iBeacon/AD, HCI model, H4 framing, btsnoop codec, profiles, statistics.
        .target(name: "IBeaconCore"),
        // Transport-agnostic orchestration: controller client, advertiser, scanner, calibrator.
        .target(
            name: "IBeaconHost",
            dependencies: [
                "IBeaconCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // libbluetooth, only imported by IBeaconTransports/Syscalls.swift.
        .systemLibrary(
            name: "CBlueZ",
            pkgConfig: "bluez",
            providers: [.apt(["libbluetooth-dev"])]
        ),
        // libmosquitto (the Eclipse Mosquitto MQTT client), only imported by IBeaconTransports/Mosquitto.swift.
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // Real I/O: BlueZ HCI socket, H4 over serial/TCP, btsnoop files, the MQTT client.
        .target(
            name: "IBeaconTransports",
            dependencies: [
                "IBeaconCore", "IBeaconHost", "CBlueZ", "CMosquitto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .executableTarget(
            name: "ibeacon",
            dependencies: [
                "IBeaconCore", "IBeaconHost", "IBeaconTransports",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Decoding benchmark (`make bench`).
        .executableTarget(name: "ibeacon-bench", dependencies: ["IBeaconCore", "IBeaconHost"]),
        // Calibration simulation (`make calsim`): the accuracy table in BENCHMARKS.md.
        .executableTarget(
            name: "ibeacon-calsim", dependencies: ["IBeaconCore", "IBeaconHost", "IBeaconTestSupport"]),
        // Scripted transport, behavioural fake controller, manual clock, recording log.
        .target(
            name: "IBeaconTestSupport",
            dependencies: ["IBeaconCore", "IBeaconHost", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "IBeaconCoreTests", dependencies: ["IBeaconCore", "IBeaconTestSupport"]),
        .testTarget(name: "IBeaconHostTests", dependencies: ["IBeaconHost", "IBeaconTestSupport"]),
        .testTarget(name: "IBeaconTransportsTests", dependencies: ["IBeaconTransports", "IBeaconTestSupport"]),
        .testTarget(name: "ibeaconCLITests", dependencies: ["IBeaconCore", "IBeaconTestSupport"], exclude: ["help"]),
    ]
)
