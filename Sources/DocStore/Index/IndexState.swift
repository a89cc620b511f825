import Foundation

/// What the index file records about one registered index.
struct IndexState: Sendable {
    let id: Int64
    let definition: IndexDefinition
    var lastSequence: Int64
    var rowCount: Int64
    /// The exact sum of the rows' integer values; `nil` when unknown (it overflowed 64 bits).
    var integerSum: Int64? = 0
    /// How many rows have a value that is not an integer (a double or not a number).
    var otherValues: Int64 = 0
    /// Whether the index has full-text tables (its map function has emitted a full-text key).
    var hasText = false
    var table: String { IndexSchema.rowsTable(id) }
    var textTable: String { IndexSchema.textTable(id) }
    var fullTextTable: String { IndexSchema.fullTextTable(id) }

    /// Accounts for a row added (`sign` 1) or removed (`sign` -1) with this value.
    mutating func account(integer: Int?, sign: Int64) {
        guard let integer else {
            otherValues += sign
            return
        }
        guard let sum = integerSum else { return }
        let (product, overflow1) = Int64(integer).multipliedReportingOverflow(by: sign)
        let (total, overflow2) = sum.addingReportingOverflow(product)
        integerSum = overflow1 || overflow2 ? nil : total
    }
}
