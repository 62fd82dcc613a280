enum MalformedCorpus { static func write(to: String, base: KilnFormat.Model) throws -> [String] { [] } }
import KilnFormat
