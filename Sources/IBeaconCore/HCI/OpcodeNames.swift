extension HCIOpcode { public var name: String? { nil } }
