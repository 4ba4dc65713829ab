extension Double {
    /// The value with exactly `decimals` digits after the point, as C's `%.Nf` writes it
    /// (`"%*.*f"` with `width`, spaces on the left): the exact binary value rounded to the
    /// nearest, a tie to even, `-0.0` kept, `nan`/`inf`/`-inf`. Written here so that no
    /// module needs Foundation's `String(format:)`.
    ///
    /// `decimals` is clamped to 0…15; magnitudes from 2^52 / 10^decimals up fall back to
    /// Swift's shortest round-trip spelling.
    public func fixed(_ decimals: Int, width: Int = 0) -> String {
        let text = fixedText(max(0, min(decimals, 15)))
        return text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }

    private func fixedText(_ digits: Int) -> String {
        let sign = self.sign == .minus ? "-" : ""
        guard isFinite else { return isNaN ? "nan" : sign + "inf" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }  // exact up to 10^22
        let magnitude = abs(self)
        let product = magnitude * scale
        guard product < 0x1p52 else { return sign + magnitude.description }
        // magnitude × scale = product + error exactly; round that sum, not the rounded product.
        let error = (-product).addingProduct(magnitude, scale)
        let whole = product.rounded(.down)
        // `product - whole - 0.5` is exact below 2^52, so the sum has the sign of the true excess.
        let aboveHalf = (product - whole - 0.5) + error
        var n = UInt64(whole)
        if aboveHalf > 0 || (aboveHalf == 0 && n % 2 == 1) { n += 1 }
        guard digits > 0 else { return sign + String(n) }
        let unit = UInt64(scale)
        let fraction = String(n % unit)
        return sign + String(n / unit) + "." + String(repeating: "0", count: digits - fraction.count) + fraction
    }
}
