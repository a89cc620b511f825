extension Array where Element: Sendable {
    /// `transform` applied to every element with at most `limit` calls running at once; the results
    /// in the order of the elements. The first error cancels the calls still running and is thrown.
    func concurrentMap<Result: Sendable>(limit: Int,
                                         _ transform: @escaping @Sendable (Element) async throws -> Result) async throws -> [Result] {
        try await withThrowingTaskGroup(of: (Int, Result).self) { group in
            var results = [Result?](repeating: nil, count: count)
            var next = 0
            func launch() {
                let (index, element) = (next, self[next])
                group.addTask { (index, try await transform(element)) }
                next += 1
            }
            while next < Swift.min(Swift.max(1, limit), count) { launch() }
            while let (index, result) = try await group.next() {
                results[index] = result
                if next < count { launch() }
            }
            return results.map { $0! }
        }
    }
}
